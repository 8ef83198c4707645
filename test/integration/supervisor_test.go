package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/wop"
)

// capRecord returns the registry record of the capability named name.
func capRecord(h *host.Host, name string) registry.Record {
	for _, r := range h.Registry().Records() {
		if r.Name == name {
			return r
		}
	}
	return registry.Record{}
}

// waitForState waits until the capability is in state after at least
// restarts restart attempts.
func waitForState(t *testing.T, h *host.Host, name string, state registry.State, restarts int) registry.Record {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if r := capRecord(h, name); r.State == state && r.Restarts >= restarts {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never reached %s after %d restarts: %+v", name, state, restarts, capRecord(h, name))
	return registry.Record{}
}

// A plugin that keeps crashing is given up on after crash_limit crashes
// within crash_window: it stays failed with the reason, and the other
// families keep serving.
func TestCrashLimitGivesUp(t *testing.T) {
	h := startHost(t, writeConfig(t, `
host {
  plugin_dir   = "BIN"
  crash_limit  = 2
  crash_window = "10m"
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "other" {
  plugin   = "testcap"
  families = ["test.other"]
}
`))
	crash := func() {
		_, err := h.Call(context.Background(), "test.other", "exit", json.RawMessage(`{}`), host.RunOptions{})
		if c := wop.CodeOf(err); c != wop.CodeUnavailable {
			t.Fatalf("the crashing call: %v, want unavailable", err)
		}
	}
	crash()
	if r := waitForState(t, h, "other", registry.StateReady, 1); r.Restarts != 1 {
		t.Fatalf("after the first crash: %+v, want one restart", r)
	}
	crash()
	r := waitForState(t, h, "other", registry.StateFailed, 1)
	if !strings.Contains(r.LastError, "crashed 2 times") || !strings.Contains(r.LastError, "crash_limit = 2") {
		t.Errorf("failed record %+v does not give the reason", r)
	}
	if _, err := h.Call(context.Background(), "test.other", "echo", json.RawMessage(`{}`), host.RunOptions{}); wop.CodeOf(err) != wop.CodeCapabilityNotProvided {
		t.Errorf("call to the given-up family: %v, want capability_not_provided", err)
	}
	if _, err := h.Call(context.Background(), "test.echo", "echo", json.RawMessage(`{}`), host.RunOptions{}); err != nil {
		t.Errorf("the other family stopped serving: %v", err)
	}
}

// Close does not wait out a restart backoff.
func TestCloseDuringRestartBackoff(t *testing.T) {
	h := startHost(t, probeConfig(t, ""))
	_, _ = h.Call(context.Background(), "test.other", "exit", json.RawMessage(`{}`), host.RunOptions{})
	waitForState(t, h, "other", registry.StateRestarting, 1)
	done := make(chan struct{})
	go func() {
		h.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close is still waiting 20 s after a crash")
	}
}

// A node run without a deadline of its own ends at the host's run_timeout.
func TestRunTimeoutBoundsANodeWithoutDeadline(t *testing.T) {
	cfg := writeConfig(t, `
host {
  plugin_dir  = "BIN"
  run_timeout = "1s"
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" { path = "`+probePack(t)+`" }
`)
	start := time.Now()
	res := runHost(t, `{"ms":60000,"inPack":true}`, "--config", cfg, "run", "probe.sleep", "--input", "-")
	if e := decodeEnvelope(t, res); e.Code != "deadline_exceeded" {
		t.Fatalf("got %+v, want deadline_exceeded", e)
	}
	if took := time.Since(start); took > 45*time.Second {
		t.Fatalf("the run took %s despite run_timeout = 1s", took)
	}
}
