package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BinDir holds the PostgreSQL server programs StartPrivate runs.
const BinDir = "/usr/lib/postgresql/15/bin"

// serverUser is the OS user that runs a private server when the test
// runs as root, which PostgreSQL refuses.
const serverUser = "postgres"

// Server is a PostgreSQL server of one test's own, in a temporary
// directory, listening on 127.0.0.1 only. Trust authentication lets the
// superuser "postgres" in without a password.
type Server struct {
	t       testing.TB
	dataDir string
	port    int
	// asUser prefixes each server command: runuser when running as root.
	asUser []string
}

// StartPrivate initialises and starts a private server on a free port; it
// is stopped when the test ends. A test that must stop, start or lose its
// database uses one; a test that only needs a database uses DSN. Without
// the server programs in BinDir it skips like DSN.
func StartPrivate(t testing.TB) *Server {
	t.Helper()
	for _, prog := range []string{"initdb", "pg_ctl"} {
		if _, err := os.Stat(filepath.Join(BinDir, prog)); err != nil {
			unavailable(t, "no PostgreSQL server programs in %s", BinDir)
		}
	}
	s := &Server{t: t}
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		u, err := user.Lookup(serverUser)
		if err != nil {
			unavailable(t, "no %q user to run PostgreSQL as (it refuses root)", serverUser)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		// The temporary directories above it are root's: the server user
		// must reach its own.
		dir, err = os.MkdirTemp("", "wophost-pgtest-")
		if err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		s.asUser = []string{"runuser", "-u", serverUser, "--"}
	}
	s.dataDir = filepath.Join(dir, "data")
	s.port = freePort(t)
	s.run(filepath.Join(BinDir, "initdb"), "-D", s.dataDir, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C")
	conf := fmt.Sprintf("listen_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\nfsync = off\n", s.port, dir)
	s.run("sh", "-c", fmt.Sprintf("cat >> %s/postgresql.conf <<'EOF'\n%sEOF\n", s.dataDir, conf))
	s.Start()
	t.Cleanup(func() {
		if s.running() {
			s.Stop()
		}
	})
	return s
}

// DSN is the connection string of the server's database "postgres".
func (s *Server) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Start starts the stopped server and waits until it accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	s.run(filepath.Join(BinDir, "pg_ctl"), "-D", s.dataDir, "-l", filepath.Join(s.dataDir, "server.log"), "-w", "-t", "60", "start")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, s.DSN())
		if err == nil {
			_ = conn.Close(ctx)
			return
		}
		if ctx.Err() != nil {
			s.t.Fatalf("pgtest: the private server does not accept connections: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the server at once, closing every connection to it.
func (s *Server) Stop() {
	s.t.Helper()
	s.run(filepath.Join(BinDir, "pg_ctl"), "-D", s.dataDir, "-m", "immediate", "-w", "-t", "60", "stop")
}

// running reports whether the server is up.
func (s *Server) running() bool {
	args := append(append([]string(nil), s.asUser...), filepath.Join(BinDir, "pg_ctl"), "-D", s.dataDir, "status")
	return exec.Command(args[0], args[1:]...).Run() == nil
}

// run runs a server program as the server user, failing the test with its
// output when it fails.
func (s *Server) run(name string, args ...string) {
	s.t.Helper()
	argv := append(append(append([]string(nil), s.asUser...), name), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = os.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("pgtest: %s: %v\n%s", filepath.Base(name), err, out)
	}
}

// freePort asks the kernel for a free port on 127.0.0.1.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
