package reach

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/pack"
	"github.com/wophost/wophost/sdk/wop"
)

// TestMain makes the test binary a held child when the fork reach starts
// it, as the pack's binary is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == holdArg {
		hold()
	}
	os.Exit(m.Run())
}

func try(t *testing.T, ctx context.Context, reach, target string) (*Answer, error) {
	t.Helper()
	return Try(&pack.Ctx{Context: ctx}, &Input{Reach: reach, Target: target})
}

// Each reach that can work here works, and says what it did.
func TestReachesWork(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, c := range []struct{ reach, target, detail string }{
		{Environ, "", "WOPHOST_API_TOKEN is"},
		{Read, file, "read 5 bytes of " + file},
		{Write, filepath.Join(dir, "w"), "wrote " + filepath.Join(dir, "w")},
		{Connect, ln.Addr().String(), "connected to " + ln.Addr().String()},
		{Exec, "", "ran /bin/true"},
		{Fork, "3", "started 3 of 3 processes"},
		{Alloc, "3000000", "allocated and touched 3000000 bytes"},
		{Own, "", "wrote and read back a file in " + os.TempDir()},
	} {
		a, err := try(t, context.Background(), c.reach, c.target)
		if err != nil || !a.Done || !strings.Contains(a.Detail, c.detail) {
			t.Errorf("%s %q: %+v, %v; want done saying %q", c.reach, c.target, a, err, c.detail)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "w")); err != nil {
		t.Errorf("write left no file: %v", err)
	}
}

// A reach that fails returns the system's error wrapped, so that
// errors.Is finds the errno, or the context's error for spin.
func TestFailuresKeepTheCause(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close()
	missing := filepath.Join(t.TempDir(), "none", "x")
	for _, c := range []struct {
		reach, target string
		want          error
	}{
		{Read, missing, syscall.ENOENT},
		{Write, missing, fs.ErrNotExist},
		{Connect, addr, syscall.ECONNREFUSED},
	} {
		if _, err := try(t, context.Background(), c.reach, c.target); !errors.Is(err, c.want) {
			t.Errorf("%s %q: %v, want an error that is %v", c.reach, c.target, err, c.want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := try(t, ctx, Spin, ""); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("spin: %v after %s, want it ended by the deadline", err, time.Since(start))
	}
}

// Inputs a reach cannot use are validation errors, the bound plus one
// included.
func TestBadTargets(t *testing.T) {
	for _, c := range []struct{ reach, target string }{
		{Fork, "0"}, {Fork, "10001"}, {Fork, "x"}, {Alloc, "0"}, {Alloc, ""}, {"forks", ""},
	} {
		if _, err := try(t, context.Background(), c.reach, c.target); wop.CodeOf(err) != wop.CodeValidation {
			t.Errorf("%s %q: %v, want %s", c.reach, c.target, err, wop.CodeValidation)
		}
	}
}
