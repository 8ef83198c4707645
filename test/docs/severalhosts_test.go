package docs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wophost/wophost/core/api"
	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/internal/pgtest"
)

// severalHostsPath is the page on running several hosts on one database.
const severalHostsPath = "docs/several-hosts.md"

// TestSeveralHostsCodeBlocks checks every fenced code block of the page by
// doing what it says: the sh commands run (make targets dry, with -n; the
// pg_dump and pg_restore lines for real, on databases of their own), the
// SQL runs, the HCL loads as a host config, and the HAProxy health check
// asks the API for a route that answers without a token, 200 when the
// host is ready and 503 when not. A block of any other language fails.
func TestSeveralHostsCodeBlocks(t *testing.T) {
	root := moduleRoot(t)
	blocks := fencedBlocks(t, root, severalHostsPath)
	if len(blocks) == 0 {
		t.Fatalf("%s has no code blocks", severalHostsPath)
	}
	for _, b := range blocks {
		t.Run(fmt.Sprintf("%s:%d %s", severalHostsPath, b.line, b.lang), func(t *testing.T) {
			switch b.lang {
			case "sh":
				checkCommands(t, root, b.text)
			case "sql":
				checkSQL(t, b.text)
			case "hcl":
				checkHostConfig(t, b.text)
			case "haproxy":
				checkHAProxy(t, b.text)
			default:
				t.Errorf("a %q block: only sh, sql, hcl and haproxy blocks are checked, so only they may appear", b.lang)
			}
		})
	}
}

// assignment is a leading NAME=value of a command line.
var assignment = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=\S*$`)

// checkCommands runs the lines of an sh block in order.
func checkCommands(t *testing.T, root, text string) {
	var env []string
	var db *dumpDatabases
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		words := strings.Fields(line)
		var assigned []string
		for len(words) > 0 && assignment.MatchString(words[0]) {
			assigned, words = append(assigned, words[0]), words[1:]
		}
		if len(words) == 0 {
			t.Fatalf("%q runs nothing", line)
		}
		switch words[0] {
		case "make":
			// A dry run: the target exists and its recipe expands.
			cmd := exec.Command("make", append([]string{"-n"}, words[1:]...)...)
			cmd.Dir, cmd.Env = root, append(os.Environ(), assigned...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%q: make -n: %v\n%s", line, err, out)
			}
		case "pg_dump", "pg_restore":
			if db == nil {
				db = newDumpDatabases(t)
				env = append(os.Environ(), "WOPHOST_DATABASE_URL="+db.source, "WOPHOST_RESTORE_URL="+db.target)
			}
			cmd := exec.Command("sh", "-c", line)
			cmd.Dir, cmd.Env = db.dir, append(env, assigned...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%q: %v\n%s", line, err, out)
			}
		default:
			t.Errorf("%q: no check knows how to run %s", line, words[0])
		}
	}
	if db != nil {
		db.checkRestored(t)
	}
}

// dumpDatabases are the databases a backup block works on: source holds
// wophost schemas and one other, target is empty until restored into.
type dumpDatabases struct {
	source, target, dir string
}

func newDumpDatabases(t *testing.T) *dumpDatabases {
	t.Helper()
	d := &dumpDatabases{source: pgtest.DSN(t), target: pgtest.DSN(t), dir: t.TempDir()}
	execSQL(t, d.source,
		"CREATE SCHEMA wophost",
		"CREATE TABLE wophost.run_records (id text PRIMARY KEY)",
		"INSERT INTO wophost.run_records VALUES ('run_1')",
		"CREATE SCHEMA wophost_prompts",
		"CREATE TABLE wophost_prompts.prompts (name text PRIMARY KEY)",
		"INSERT INTO wophost_prompts.prompts VALUES ('greeting')",
		"CREATE SCHEMA other",
		"CREATE TABLE other.t (x int)")
	return d
}

// checkRestored checks that the target holds the wophost schemas' rows
// and nothing else.
func (d *dumpDatabases) checkRestored(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.target)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var runs, prompts, others int
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM wophost.run_records WHERE id = 'run_1'),
		(SELECT count(*) FROM wophost_prompts.prompts WHERE name = 'greeting'),
		(SELECT count(*) FROM pg_namespace WHERE nspname = 'other')`).Scan(&runs, &prompts, &others)
	if err != nil || runs != 1 || prompts != 1 || others != 0 {
		t.Errorf("restored: %d run records, %d prompts, other schema %d times (%v); want 1, 1, 0", runs, prompts, others, err)
	}
}

// checkSQL runs each statement of an sql block on a database of its own.
func checkSQL(t *testing.T, text string) {
	var stmts []string
	for _, s := range strings.Split(text, ";") {
		if s = strings.TrimSpace(s); s != "" {
			stmts = append(stmts, s)
		}
	}
	execSQL(t, pgtest.DSN(t), stmts...)
}

func execSQL(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

// checkHostConfig loads an hcl block as a host config, with the variables
// it reads set.
func checkHostConfig(t *testing.T, text string) {
	t.Setenv("WOPHOST_DATABASE_URL", "postgres://wophost@db.invalid:5432/wophost")
	t.Setenv("WOPHOST_API_TOKEN", "a-token-of-the-docs-test")
	path := filepath.Join(t.TempDir(), "host.hcl")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.NewLoader().Load(path)
	if diags.HasErrors() {
		t.Fatalf("the block does not load:\n%s", config.FormatDiagnostics(diags))
	}
	if cfg.Host.Storage.Backend != config.BackendPostgres {
		t.Errorf("backend %q, want %q", cfg.Host.Storage.Backend, config.BackendPostgres)
	}
}

// httpchk is HAProxy's health check request line.
var httpchk = regexp.MustCompile(`(?m)^\s*option httpchk (\S+) (\S+)\s*$`)

// checkHAProxy checks the config with haproxy itself when it is installed,
// and always checks that its health check asks for a route the API serves
// without a token and answers by the host's readiness.
func checkHAProxy(t *testing.T, text string) {
	if haproxy, err := exec.LookPath("haproxy"); err == nil {
		path := filepath.Join(t.TempDir(), "haproxy.cfg")
		if err := os.WriteFile(path, []byte(text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(haproxy, "-c", "-f", path).CombinedOutput(); err != nil {
			t.Errorf("haproxy -c: %v\n%s", err, out)
		}
	} else {
		t.Log("haproxy is not installed: only the health check is checked")
	}
	m := httpchk.FindStringSubmatch(text)
	if m == nil {
		t.Fatal("no option httpchk line")
	}
	if !strings.Contains(text, "http-check expect status 200") {
		t.Error("the health check does not expect 200")
	}
	for _, c := range []struct {
		ready error
		want  int
	}{{nil, http.StatusOK}, {fmt.Errorf("the database is unreachable"), http.StatusServiceUnavailable}} {
		srv := api.New(api.NewCurrent(readiness{c.ready}), api.Options{Tokens: []string{"a-token"}})
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(m[1], m[2], nil))
		if rec.Code != c.want {
			t.Errorf("%s %s without a token, Ready() = %v: %d %s, want %d", m[1], m[2], c.ready, rec.Code, rec.Body, c.want)
		}
	}
}

// readiness is an api.Backend that only answers Ready.
type readiness struct{ err error }

func (r readiness) ServesNode(string) bool       { return false }
func (r readiness) Registry() *registry.Registry { return registry.New(registry.Implementation{}) }
func (r readiness) Packs() []host.PackInfo       { return nil }
func (r readiness) Ready() error                 { return r.err }
func (r readiness) RunRecord(context.Context, string) (*host.RunRecord, error) {
	return nil, fmt.Errorf("readiness keeps no records")
}
func (r readiness) ListRuns(context.Context, host.RunFilter) (*host.RunPage, error) {
	return nil, fmt.Errorf("readiness keeps no records")
}
func (r readiness) Run(context.Context, string, json.RawMessage, host.RunOptions) (*host.RunResult, error) {
	return nil, fmt.Errorf("readiness runs nothing")
}
