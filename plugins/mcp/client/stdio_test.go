package client

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/test/testbin"
)

// wrappedScripted returns stdio options running the scripted server behind
// a shell that first leaves child (a shell command, run in the background
// with the server's stdin, stdout and stderr) and writes the shell's pid
// and the child's into the returned file. A cleanup kills both, so that a
// failing test leaves nothing behind.
func wrappedScripted(t *testing.T, child string) (*StdioOptions, string) {
	t.Helper()
	bin := serverBinary(t, scriptedPkg)
	pidfile := filepath.Join(t.TempDir(), "pids")
	script := child + ` &
echo "$$ $!" > ` + pidfile + `.tmp && mv ` + pidfile + `.tmp ` + pidfile + `
exec ` + bin + ` -era modern`
	t.Cleanup(func() {
		b, _ := os.ReadFile(pidfile)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return &StdioOptions{Command: []string{"/bin/sh", "-c", script}, Dir: filepath.Dir(bin)}, pidfile
}

// serverPIDs reads the pids the wrapper wrote. The server answers only
// after the wrapper wrote them, so the file is complete once it has.
func serverPIDs(t *testing.T, pidfile string) (leader, child int) {
	t.Helper()
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		t.Fatalf("pid file holds %q, want two pids", b)
	}
	leader, _ = strconv.Atoi(f[0])
	child, _ = strconv.Atoi(f[1])
	return leader, child
}

func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(testbin.Group(pgid)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d survived: %+v", pgid, testbin.Group(pgid))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A server that exits while a child of its still holds its output is
// noticed at once: the call in flight fails without waiting for its
// deadline, and the next call starts a fresh server. A child in the
// server's group goes with it; one that left the group (setsid) cannot be
// killed, and the transport stops reading what it holds.
func TestServerExitNoticedWhileAChildHoldsItsOutput(t *testing.T) {
	for name, child := range map[string]string{"in the group": "sleep 300", "outside the group": "setsid sleep 300"} {
		t.Run(name, func(t *testing.T) {
			opts, pidfile := wrappedScripted(t, child)
			const callTimeout = 20 * time.Second
			c := newClient(t, Options{Stdio: opts, CallTimeout: callTimeout})
			if _, err := c.CallTool(ctx(t), "passthrough", nil); err != nil {
				t.Fatal(err)
			}
			leader, _ := serverPIDs(t, pidfile)

			t0 := time.Now()
			_, err := c.CallTool(ctx(t), "exit", nil)
			took := time.Since(t0)
			t.Logf("the call failed %s after the server exited", took.Round(time.Millisecond))
			var te *TransportError
			if !errors.As(err, &te) {
				t.Errorf("err = %v, want a TransportError", err)
			}
			// Far below the call's own deadline, which is all that ended
			// the call when the server's exit went unseen.
			if limit := 5 * time.Second; took > limit {
				t.Errorf("the call took %s, want at most %s (its deadline is %s)", took, limit, callTimeout)
			}
			waitGroupGone(t, leader)

			if res, err := c.CallTool(ctx(t), "passthrough", nil); err != nil || string(res) != passthroughResult {
				t.Fatalf("after the exit: %s %v", res, err)
			}
			next, _ := serverPIDs(t, pidfile)
			if next == leader {
				t.Fatalf("no new server was started (pid %d)", next)
			}
			c.Close()
			waitGroupGone(t, next)
		})
	}
}

// A child that leaves the server's process group cannot be killed with
// it and keeps the server's output open; Close does not wait for it.
func TestCloseNotHeldByADescendantOutsideTheGroup(t *testing.T) {
	opts, pidfile := wrappedScripted(t, "setsid sleep 300")
	c, err := New(Options{Stdio: opts, CallTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(ctx(t), "passthrough", nil); err != nil {
		t.Fatal(err)
	}
	leader, _ := serverPIDs(t, pidfile)
	closed := make(chan struct{})
	t0 := time.Now()
	go func() {
		c.Close()
		close(closed)
	}()
	const limit = 5 * time.Second
	select {
	case <-closed:
	case <-time.After(limit + 10*time.Second):
		t.Fatalf("Close had not returned after %s", limit+10*time.Second)
	}
	took := time.Since(t0)
	t.Logf("closed in %s", took.Round(time.Millisecond))
	if took > limit {
		t.Errorf("Close took %s, want at most %s", took, limit)
	}
	waitGroupGone(t, leader)
	// The cleanup kills the escaped child.
}
