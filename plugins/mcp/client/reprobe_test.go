package client

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when told to, so that a test steps
// past a re-probe wait or a health TTL instead of sleeping through it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

// withFakeClock gives c a fake clock, before any request is made on it.
func withFakeClock(c *Client) *fakeClock {
	f := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.now = f.now
	return f
}

// revisionOf calls scripted's echo_params and returns the revision the
// request was made at: the _meta protocolVersion of a 2026-07-28 request;
// a 2025-11-25 one carries no _meta.
func revisionOf(t *testing.T, c *Client) string {
	t.Helper()
	res, err := c.CallTool(ctx(t), "echo_params", json.RawMessage(`{}`))
	if err != nil {
		t.Fatalf("echo_params: %v", err)
	}
	var r struct {
		StructuredContent struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatal(err)
	}
	v, ok := r.StructuredContent.Meta[metaProtocolVersion]
	if !ok {
		return RevisionLegacy
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// A server that exits on its first start is not taken for a legacy one:
// its second process refuses initialize, so it is probed again, and the
// first call is made at 2026-07-28.
func TestServerExitingOnceIsProbedAgain(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "started")
	c := newClient(t, Options{Stdio: stdio(serverBinary(t, scriptedPkg), "-first-start-exit", mark), DiscoverTimeout: time.Second})
	if v := revisionOf(t, c); v != RevisionModern {
		t.Errorf("first call at %s, want %s", v, RevisionModern)
	}
	if e, _ := c.state(); e != eraModern {
		t.Errorf("era %v, want modern", e)
	}
	if h := c.Health(ctx(t)); h.Status != StatusReachable || h.ProtocolVersion != RevisionModern {
		t.Errorf("health = %+v", h)
	}
}

// A server taken for a legacy one because its probe went unanswered is
// probed again when its process is replaced.
func TestUnansweredProbeRepeatedOnRestart(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "started")
	c := newClient(t, Options{Stdio: stdio(serverBinary(t, scriptedPkg), "-era", "dual", "-first-start-silent", mark),
		DiscoverTimeout: 300 * time.Millisecond, ReprobeAfter: time.Hour})
	if v := revisionOf(t, c); v != RevisionLegacy {
		t.Fatalf("after a silent probe: %s, want %s", v, RevisionLegacy)
	}
	if _, err := c.CallTool(ctx(t), "exit", nil); err == nil {
		t.Fatal("exit: no error")
	}
	if v := revisionOf(t, c); v != RevisionModern {
		t.Errorf("on the next process: %s, want %s", v, RevisionModern)
	}
}

// ... and after a wait on the same process, without disturbing it.
func TestUnansweredProbeRepeatedAfterBackoff(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "started")
	c := newClient(t, Options{Stdio: stdio(serverBinary(t, scriptedPkg), "-era", "dual", "-first-start-silent", mark),
		DiscoverTimeout: 300 * time.Millisecond, ReprobeAfter: 400 * time.Millisecond})
	clock := withFakeClock(c)
	if v := revisionOf(t, c); v != RevisionLegacy {
		t.Fatalf("after a silent probe: %s, want %s", v, RevisionLegacy)
	}
	key := c.stdio.runningKey()
	clock.advance(399 * time.Millisecond)
	if v := revisionOf(t, c); v != RevisionLegacy {
		t.Errorf("within the wait: %s, want %s", v, RevisionLegacy)
	}
	clock.advance(time.Millisecond)
	if v := revisionOf(t, c); v != RevisionModern {
		t.Errorf("after the wait: %s, want %s", v, RevisionModern)
	}
	if c.stdio.runningKey() != key {
		t.Error("the probe replaced the server process")
	}
}

// A server that never answers the probe stays a legacy one: probed again
// after each wait, in its session, and the wait doubles. One that answers
// with an error, at once or when probed again, is a legacy server for good.
func TestLegacyServersAfterReprobe(t *testing.T) {
	silent := scripted(t, Options{DiscoverTimeout: 200 * time.Millisecond, ReprobeAfter: 200 * time.Millisecond}, "legacy-silent")
	clock := withFakeClock(silent)
	if _, err := silent.ListTools(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	key := silent.stdio.runningKey()
	clock.advance(200 * time.Millisecond)
	if _, err := silent.ListTools(ctx(t), nil); err != nil {
		t.Fatalf("after the probe went unanswered again: %v", err)
	}
	silent.mu.Lock()
	e, provisional, wait := silent.era, silent.provisional, silent.reprobeWait
	silent.mu.Unlock()
	if e != eraLegacy || !provisional || wait != 400*time.Millisecond || silent.stdio.runningKey() != key {
		t.Errorf("era %v, provisional %v, next wait %v, same process %v; want legacy, provisional, 400ms, true", e, provisional, wait, silent.stdio.runningKey() == key)
	}
	clock.advance(399 * time.Millisecond)
	if silent.probeDue() {
		t.Error("probed again before the doubled wait has passed")
	}
	clock.advance(time.Millisecond)
	if !silent.probeDue() {
		t.Error("no probe due once the doubled wait has passed")
	}

	answering := scripted(t, Options{DiscoverTimeout: 200 * time.Millisecond, ReprobeAfter: time.Millisecond}, "legacy-error")
	if _, err := answering.ListTools(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	answering.mu.Lock()
	provisional = answering.provisional
	answering.mu.Unlock()
	if provisional || answering.probeDue() {
		t.Error("a server that answered the probe with an error is probed again")
	}

	mark := filepath.Join(t.TempDir(), "started")
	late := newClient(t, Options{Stdio: stdio(serverBinary(t, scriptedPkg), "-era", "legacy-error", "-first-start-silent", mark),
		DiscoverTimeout: 200 * time.Millisecond, ReprobeAfter: 100 * time.Millisecond})
	lateClock := withFakeClock(late)
	if _, err := late.ListTools(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	if late.probeDue() {
		t.Error("a probe is due before the wait has passed")
	}
	lateClock.advance(100 * time.Millisecond)
	if _, err := late.ListTools(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	if e, _ := late.state(); e != eraLegacy || late.probeDue() {
		t.Error("a server that answered the second probe with an error is probed again")
	}
	lateClock.advance(time.Hour)
	if late.probeDue() {
		t.Error("a server that answered the second probe with an error is probed again after the wait")
	}
}

// A server that cannot be started says nothing of its revision: its calls
// fail, it is unreachable, and once its executable is there it is probed
// and used like any other.
func TestUnstartableServerIsNotLegacy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server")
	c := newClient(t, Options{Stdio: &StdioOptions{Command: []string{path}}})
	_, err := c.CallTool(ctx(t), "echo_params", nil)
	var te *TransportError
	if !errors.As(err, &te) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("call: %v, want a TransportError for the missing executable", err)
	}
	// It failed at the probe; no legacy handshake was tried.
	if te.Op != "server/discover" {
		t.Errorf("failed at %s, want at server/discover", te.Op)
	}
	if e, _ := c.state(); e != eraUnknown {
		t.Errorf("era %v after a failed start, want unknown", e)
	}
	if h := c.Health(ctx(t)); h.Status != StatusUnreachable {
		t.Errorf("health = %+v, want unreachable", h)
	}
	if err := os.Symlink(serverBinary(t, scriptedPkg), path); err != nil {
		t.Fatal(err)
	}
	if v := revisionOf(t, c); v != RevisionModern {
		t.Errorf("once it can start: %s, want %s", v, RevisionModern)
	}
}

// A server that exits on the probe and again on the handshake that
// follows is not left a legacy one: the call fails, and the next one
// probes the next process.
func TestServerFailingTwiceIsProbedAgain(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "server")
	starts := filepath.Join(dir, "starts")
	body := "#!/bin/sh\necho x >> " + starts + "\n[ $(wc -l < " + starts + ") -le 2 ] && exit 1\nexec " + serverBinary(t, scriptedPkg) + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, Options{Stdio: &StdioOptions{Command: []string{script}}, DiscoverTimeout: time.Second, ReprobeAfter: time.Hour})
	if _, err := c.CallTool(ctx(t), "echo_params", nil); err == nil {
		t.Fatal("first call: no error from a server that exited twice")
	}
	if v := revisionOf(t, c); v != RevisionModern {
		t.Errorf("next call at %s, want %s", v, RevisionModern)
	}
}
