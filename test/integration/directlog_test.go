package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/sdk/wop"
)

// A run's call on a direct channel reaches its log even when the plugin
// that served it is killed, or stops (SIGSTOP), after the call and before
// the run ends, when the host would ask it for the run's calls: the pack's
// own account stands in, and a replay answers the call from the log.
func TestDirectCallLoggedWhenPluginGoes(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		// fail makes the node fail after the call: the account comes
		// with the failure.
		fail bool
	}{
		{"killed", syscall.SIGKILL, false},
		{"stopped", syscall.SIGSTOP, false},
		{"killed, the node fails", syscall.SIGKILL, true},
	} {
		sig := tc.sig
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "state")
			cfg := writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
  state_dir  = %q
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" {
  path = %q
  # The test has it write where the test looks, or start processes:
  # it runs uncontained (containment has its own tests).
  sandbox { enabled = false }
}
`, state, probePack(t)))
			h := startHost(t, cfg)
			pids := children("testcap")
			if len(pids) != 1 {
				t.Fatalf("testcap processes: %v", pids)
			}
			called, until := filepath.Join(dir, "called"), filepath.Join(dir, "until")
			in := fmt.Sprintf(`{"family":"test.echo","method":"echo","payload":{"note":"kept"},"called":%q,"until":%q,"fail":%t}`, called, until, tc.fail)
			type outcome struct {
				res *host.RunResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				res, err := h.Run(ctx, "probe.call", json.RawMessage(in), host.RunOptions{Record: true})
				done <- outcome{res, err}
			}()
			waitForFile(t, called)
			if err := syscall.Kill(pids[0], sig); err != nil {
				t.Fatal(err)
			}
			if sig == syscall.SIGSTOP {
				// Before the host's own cleanup, which stops the plugin.
				t.Cleanup(func() { _ = syscall.Kill(pids[0], syscall.SIGCONT) })
			}
			if err := os.WriteFile(until, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			o := <-done
			if tc.fail {
				if wop.CodeOf(o.err) != "probe.failed" || o.res == nil {
					t.Fatalf("run: %v; want the node's failure", o.err)
				}
			} else if o.err != nil {
				t.Fatalf("run: %v", o.err)
			}
			rec := readRecord(t, state, o.res.RunID)
			l := rec.Invocations
			if l == nil || l.Truncated || len(l.Calls) != 1 {
				t.Fatalf("record's log %+v; want the one call, whole", l)
			}
			c := l.Calls[0]
			if c.Family != "test.echo" || c.Method != "echo" || !c.Direct || c.ReportedBy != dispatch.ReportedByPack || c.Error != nil ||
				!sameJSONText(c.Result, `{"note":"kept"}`) || c.Key != dispatch.InvocationKey("test.echo", "echo", []byte(`{"note":"kept"}`)) {
				t.Fatalf("logged call %+v; want test.echo.echo, direct, from the pack's account, with its result", c)
			}
			// A replay (another host, whose own plugin is fine) answers
			// the call from the log.
			rep := runJSON(t, cfg, "--replay", o.res.RunID)
			if wantCode := map[bool]int{false: 0, true: 1}[tc.fail]; rep.code != wantCode || rep.line.Replay == nil || rep.line.Replay.Served != 1 || rep.line.Replay.Diverged != 0 {
				t.Fatalf("replay: exit %d, summary %+v\n%s%s", rep.code, rep.line.Replay, rep.stdout, rep.stderr)
			}
		})
	}
}

// sameJSONText reports whether got is the JSON value want.
func sameJSONText(got json.RawMessage, want string) bool {
	var a, b any
	return json.Unmarshal(got, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && fmt.Sprint(a) == fmt.Sprint(b)
}
