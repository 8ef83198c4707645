package dispatch

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

func TestRunsAddGetRemove(t *testing.T) {
	runs := NewRuns()
	if runs.Len() != 0 {
		t.Fatalf("Len() = %d, want 0", runs.Len())
	}
	a := &Run{ID: "run_a", NodeID: "n1"}
	b := &Run{ID: "run_b", NodeID: "n2"}
	removeA := runs.Add(a)
	removeB := runs.Add(b)
	if runs.Len() != 2 {
		t.Fatalf("Len() = %d, want 2", runs.Len())
	}
	if got, ok := runs.Get("run_a"); !ok || got != a {
		t.Fatalf("Get(run_a) = %v, %v", got, ok)
	}
	if got, ok := runs.Get("run_missing"); ok || got != nil {
		t.Fatalf("Get(run_missing) = %v, %v", got, ok)
	}

	removeA()
	if _, ok := runs.Get("run_a"); ok {
		t.Fatal("run_a still present after remove")
	}
	if got, ok := runs.Get("run_b"); !ok || got != b {
		t.Fatalf("Get(run_b) after removing run_a = %v, %v", got, ok)
	}
	removeA() // removing twice is harmless
	if runs.Len() != 1 {
		t.Fatalf("Len() = %d, want 1", runs.Len())
	}
	removeB()
	if runs.Len() != 0 {
		t.Fatalf("Len() = %d, want 0", runs.Len())
	}
}

func TestRunsConcurrent(t *testing.T) {
	runs := NewRuns()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &Run{ID: NewID("run")}
			remove := runs.Add(r)
			if got, ok := runs.Get(r.ID); !ok || got != r {
				t.Errorf("goroutine %d: Get = %v, %v", i, got, ok)
			}
			_ = runs.Len()
			remove()
		}()
	}
	wg.Wait()
	if runs.Len() != 0 {
		t.Fatalf("Len() = %d, want 0", runs.Len())
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewID("run")
		rest, ok := strings.CutPrefix(id, "run_")
		if !ok {
			t.Fatalf("NewID(run) = %q, want prefix run_", id)
		}
		if len(rest) != 24 {
			t.Fatalf("NewID(run) = %q, want 24 hex characters after the prefix", id)
		}
		if _, err := hex.DecodeString(rest); err != nil || strings.ToLower(rest) != rest {
			t.Fatalf("NewID(run) = %q, suffix is not lowercase hex", id)
		}
		if seen[id] {
			t.Fatalf("NewID returned %q twice", id)
		}
		seen[id] = true
	}
	if id := NewID("call"); !strings.HasPrefix(id, "call_") {
		t.Fatalf("NewID(call) = %q", id)
	}
}

func TestRunCallContext(t *testing.T) {
	deadline := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	r := &Run{
		ID: "run_1", NodeID: "n1", TypeID: "demo.echo", Pack: "community.demo", Deadline: deadline,
		Traceparent: "00-abc-def-01", IdempotencyKey: "idem", Token: wop.NewRunToken("secret"),
	}
	want := wop.CallContext{
		RunID: "run_1", NodeID: "n1", TypeID: "demo.echo", Pack: "community.demo", Caller: "pack:community.demo",
		Depth: 1, Deadline: deadline, Traceparent: "00-abc-def-01", IdempotencyKey: "idem", Token: wop.NewRunToken("secret"),
	}
	if got := r.CallContext("pack:community.demo"); got != want {
		t.Fatalf("CallContext = %+v, want %+v", got, want)
	}
}

// Run tokens are 256 random bits, spelled in unpadded base64url, and
// never repeat.
func TestNewRunToken(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		tok := NewRunToken()
		b, err := base64.RawURLEncoding.DecodeString(tok.Reveal())
		if err != nil || len(b) != 32 {
			t.Fatalf("NewRunToken() = %d bytes (%v), want 32 random bytes in base64url", len(b), err)
		}
		if seen[tok.Reveal()] {
			t.Fatal("NewRunToken returned a token twice")
		}
		seen[tok.Reveal()] = true
	}
}

// A run binds exactly the calls that carry its token; a run without one
// binds none.
func TestRunBinds(t *testing.T) {
	tok := NewRunToken()
	r := &Run{ID: "run_1", Token: tok}
	if !r.Binds(wop.NewRunToken(tok.Reveal())) {
		t.Error("the run does not bind its own token")
	}
	for _, other := range []wop.RunToken{{}, NewRunToken(), wop.NewRunToken(tok.Reveal()[:len(tok.Reveal())-1])} {
		if r.Binds(other) {
			t.Errorf("the run binds %v, which is not its token", other)
		}
	}
	if (&Run{ID: "run_2"}).Binds(wop.RunToken{}) {
		t.Error("a run without a token binds a call without one")
	}
}

// A run's call_timeout bounds each call from its arrival, never past the
// deadline the call already has; without it the deadline stands.
func TestCallDeadline(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bounded := &Run{CallTimeout: 2 * time.Minute}
	for _, c := range []struct {
		run            *Run
		deadline, want time.Time
	}{
		{bounded, time.Time{}, now.Add(2 * time.Minute)},
		{bounded, now.Add(10 * time.Minute), now.Add(2 * time.Minute)},
		{bounded, now.Add(2*time.Minute + 1), now.Add(2 * time.Minute)},
		{bounded, now.Add(2 * time.Minute), now.Add(2 * time.Minute)},
		{bounded, now.Add(2*time.Minute - 1), now.Add(2*time.Minute - 1)},
		{bounded, now.Add(time.Second), now.Add(time.Second)},
		{&Run{}, now.Add(10 * time.Minute), now.Add(10 * time.Minute)},
		{&Run{}, time.Time{}, time.Time{}},
	} {
		if got := c.run.CallDeadline(c.deadline, now); !got.Equal(c.want) {
			t.Errorf("CallTimeout %v, deadline %v: %v, want %v", c.run.CallTimeout, c.deadline, got, c.want)
		}
	}
}
