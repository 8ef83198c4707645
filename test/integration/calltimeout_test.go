package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/sdk/wop"
)

// A run whose caller set no deadline holds each of its host-service calls
// to call_timeout, not to the whole run_timeout, on either path: routed
// through the host, the host bounds the call; on a direct channel, the
// pack's SDK does, and the plugin's handler gets the call's deadline. A
// plugin that holds a call (as a hung one does) answers deadline_exceeded
// at call_timeout, and the plugin sees that bound in the call context. A
// caller's own deadline stands instead, and host call without --timeout
// gets call_timeout too.
func TestCallsWithoutACallersDeadlineEndAtCallTimeout(t *testing.T) {
	for _, directChannels := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct_channels=%v", directChannels), func(t *testing.T) {
			cfg := writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir      = "BIN"
  run_timeout     = "60s"
  call_timeout    = "2s"
  direct_channels = %v
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" { path = "%s" }
`, directChannels, probePack(t)))
			h := startHost(t, cfg)
			ctx := context.Background()

			_, err := h.Run(ctx, "probe.sleep", json.RawMessage(`{"ms":20000}`), host.RunOptions{})
			if we := wop.AsError(err); we == nil || we.Code != wop.CodeDeadlineExceeded {
				t.Errorf("a 20 s call in a run without a deadline, call_timeout 2s: %v, want deadline_exceeded", err)
			}
			if _, err := h.Run(ctx, "probe.sleep", json.RawMessage(`{"ms":3000}`), host.RunOptions{Timeout: 30 * time.Second}); err != nil {
				t.Errorf("a 3 s call in a run with the caller's 30 s deadline: %v, want it served", err)
			}
			if _, err := h.Call(ctx, "test.echo", "sleep", json.RawMessage(`{"ms":20000}`), host.RunOptions{}); wop.CodeOf(err) != wop.CodeDeadlineExceeded {
				t.Errorf("an operator call of 20 s without a timeout, call_timeout 2s: %v, want deadline_exceeded", err)
			}

			res, err := h.Run(ctx, "probe.ctx", json.RawMessage(`{}`), host.RunOptions{})
			if err != nil {
				t.Fatalf("probe.ctx: %v", err)
			}
			var seen struct {
				Pack   time.Time `json:"pack"`
				Plugin struct {
					CallContext time.Time `json:"callContext"`
				} `json:"plugin"`
			}
			if err := json.Unmarshal(res.Output, &seen); err != nil {
				t.Fatalf("probe.ctx answered %s: %v", res.Output, err)
			}
			// The run's deadline is 60 s away, the call's 2 s: far apart
			// whatever the machine's pace.
			if gap := seen.Pack.Sub(seen.Plugin.CallContext); gap < 30*time.Second {
				t.Errorf("the plugin's call deadline %s is %s before the run's %s, want call_timeout's 2 s from the call", seen.Plugin.CallContext, gap, seen.Pack)
			}
		})
	}
}

// A caller's deadline past run_timeout is held to it: the node sees the
// run's deadline within run_timeout, for the near miss and for a deadline
// too large for a duration.
func TestCallersDeadlineIsHeldToRunTimeout(t *testing.T) {
	cfg := writeConfig(t, `
host {
  plugin_dir  = "BIN"
  run_timeout = "60s"
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" { path = "`+probePack(t)+`" }
`)
	h := startHost(t, cfg)
	for _, asked := range []time.Duration{time.Minute + time.Millisecond, 1000 * time.Hour, 1<<63 - 1} {
		before := time.Now()
		res, err := h.Run(context.Background(), "probe.ctx", json.RawMessage(`{}`), host.RunOptions{Timeout: asked})
		after := time.Now()
		if err != nil {
			t.Fatalf("probe.ctx with timeout %v: %v", asked, err)
		}
		var seen struct {
			Pack time.Time `json:"pack"`
		}
		if err := json.Unmarshal(res.Output, &seen); err != nil {
			t.Fatalf("probe.ctx answered %s: %v", res.Output, err)
		}
		if seen.Pack.Before(before.Add(time.Minute)) || seen.Pack.After(after.Add(time.Minute)) {
			t.Errorf("timeout %v: the node's deadline %s is not run_timeout (60 s) from the run's start, %s to %s", asked, seen.Pack, before.Add(time.Minute), after.Add(time.Minute))
		}
	}
}
