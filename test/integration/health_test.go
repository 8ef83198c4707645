package integration

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/wop"
)

// A plugin stopped by SIGSTOP stops answering its health checks: after
// the health block's failures in a row the host kills it, withdraws its
// family with the reason as the last error, restarts it by the restart
// policy, and the family serves again from the new process. The other
// capability keeps serving throughout.
func TestHungPluginIsKilledAndRestarted(t *testing.T) {
	cfg := writeConfig(t, `
host {
  plugin_dir = "BIN"
  health {
    interval = "1s"
    timeout  = "1s"
    failures = 2
  }
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "other" {
  plugin   = "testcap"
  families = ["test.other"]
}
`)
	h := startHost(t, cfg)
	pidOf := func() int {
		t.Helper()
		out, err := h.Call(context.Background(), "test.other", "pid", json.RawMessage(`{}`), host.RunOptions{Timeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("test.other.pid: %v", err)
		}
		var p struct{ PID int }
		if err := json.Unmarshal(out, &p); err != nil || p.PID == 0 {
			t.Fatalf("test.other.pid answered %s: %v", out, err)
		}
		return p.PID
	}
	hung := pidOf()
	if err := syscall.Kill(hung, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Let the process go whatever happens, so that no test leaves it behind.
	t.Cleanup(func() { _ = syscall.Kill(hung, syscall.SIGCONT) })

	stoppedAt := time.Now()
	r := waitForState(t, h, "other", registry.StateReady, 1)
	if !strings.Contains(r.LastError, "stopped answering: 2 health checks in a row failed") {
		t.Errorf("last error %q does not say the plugin stopped answering its health checks", r.LastError)
	}
	t.Logf("restarted %s after the plugin was stopped", time.Since(stoppedAt).Round(100*time.Millisecond))
	if err := syscall.Kill(hung, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the hung process %d is still there: %v", hung, err)
	}
	if again := pidOf(); again == hung {
		t.Errorf("test.other is served by the hung process %d still", hung)
	}
	if _, err := h.Call(context.Background(), "test.echo", "echo", json.RawMessage(`{}`), host.RunOptions{Timeout: 10 * time.Second}); err != nil {
		t.Errorf("test.echo beside the hung plugin: %v", err)
	}
}

// A run on a hung plugin's direct channel answers at its deadline: ending
// the run on the stuck channel holds the answer a short grace past the
// deadline at the most, not the 5 s an EndRun may take, and the run's log
// is cut where the channel's calls would be.
func TestRunOnAHungChannelAnswersAtItsDeadline(t *testing.T) {
	h := startHost(t, probeConfig(t, ""))
	out, err := h.Call(context.Background(), "test.echo", "pid", json.RawMessage(`{}`), host.RunOptions{Timeout: 10 * time.Second})
	var p struct{ PID int }
	if err != nil || json.Unmarshal(out, &p) != nil || p.PID == 0 {
		t.Fatalf("test.echo.pid: %s, %v", out, err)
	}
	if err := syscall.Kill(p.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(p.PID, syscall.SIGCONT) })

	const timeout = time.Second
	start := time.Now()
	res, err := h.Run(context.Background(), "probe.call", json.RawMessage(`{"family":"test.echo","method":"echo","payload":{"a":1}}`),
		host.RunOptions{Timeout: timeout, Record: true})
	took := time.Since(start)
	if err == nil {
		t.Fatalf("the run on a stopped plugin succeeded: %s", res.Output)
	}
	t.Logf("answered %s after it began: %v", took.Round(10*time.Millisecond), err)
	// An EndRun to the stopped plugin would have held it 5 s more.
	if took > timeout+3*time.Second {
		t.Errorf("the run answered %s after it began, with a deadline of %s", took, timeout)
	}
}

// A pack process stopped by SIGSTOP stops answering its health checks
// (go-plugin serves grpc.health.v1 in a pack as in a plugin): after the
// health block's failures in a row the host kills it, and while it waits
// to restart, the pack says why and its nodes answer unavailable,
// retryable, naming the pack. Once restarted by the restart policy, a new
// process serves its nodes. The restart backoff is held open by the
// test, so the window lasts as long as the test needs.
func TestHungPackIsKilledAndRestarted(t *testing.T) {
	cfg := writeConfig(t, `
host {
  plugin_dir = "BIN"
  health {
    interval = "1s"
    timeout  = "1s"
    failures = 2
  }
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" { path = "`+probePack(t)+`" }
`)
	policy, entered, release := heldRestarts()
	h := startHostWith(t, cfg, host.Options{Restart: policy})
	packPID := func() int {
		t.Helper()
		pidfile := filepath.Join(t.TempDir(), "pids")
		in := `{"family":"test.echo","method":"echo","pidfile":"` + pidfile + `"}`
		if _, err := h.Run(context.Background(), "probe.call", json.RawMessage(in), host.RunOptions{Timeout: 10 * time.Second}); err != nil {
			t.Fatalf("probe.call: %v", err)
		}
		return readPIDs(t, pidfile)[0]
	}
	hung := packPID()
	if err := syscall.Kill(hung, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(hung, syscall.SIGCONT) })

	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatalf("the stopped pack was not restarted within 30 s: %+v", packRecord(h, "private.wophost.probe"))
	}
	p := packRecord(h, "private.wophost.probe")
	if p.State != host.PackRestarting || !strings.Contains(p.Error, "pack stopped answering: 2 health checks in a row failed") {
		t.Errorf("the stopped pack while it waits to restart: %+v, want restarting, saying it stopped answering its health checks", p)
	}
	_, err := h.Run(context.Background(), "probe.echo", json.RawMessage(`{}`), host.RunOptions{Timeout: 10 * time.Second})
	if we := wop.AsError(err); we == nil || we.Code != wop.CodeUnavailable || !we.Retryable || !strings.Contains(we.Message, "private.wophost.probe") {
		t.Errorf("a run of the stopped pack's node: %v, want unavailable, retryable, naming the pack", err)
	}
	waitFor(t, "the stopped pack process to be gone", func() bool {
		return errors.Is(syscall.Kill(hung, 0), syscall.ESRCH)
	})

	close(release)
	waitFor(t, "the pack to serve again", func() bool {
		s := packRecord(h, "private.wophost.probe").State
		return s == host.PackReady || s == host.PackDegraded
	})
	if again := packPID(); again == hung {
		t.Errorf("the pack's node ran on the stopped process %d still", hung)
	}
	if p := packRecord(h, "private.wophost.probe"); p.Restarts != 1 {
		t.Errorf("restarts = %d, want 1", p.Restarts)
	}
}
