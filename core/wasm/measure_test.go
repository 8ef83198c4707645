package wasm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestLastInstanceMemoryBytes: the figure is the last instance's memory at
// its end, grows included, and a later run on a fresh instance replaces
// it rather than keeping the largest.
func TestLastInstanceMemoryBytes(t *testing.T) {
	m := load(t, "good_multi", LoadOptions{})
	if got := m.LastInstanceMemoryBytes(); got != pageSize {
		t.Fatalf("after load: %d bytes, want the module's one page (%d)", got, pageSize)
	}
	// echo copies the request into its answer: a 100 000-byte input makes
	// the request end past the first page and the answer past the third.
	big := json.RawMessage(`"` + strings.Repeat("x", 100_000) + `"`)
	if _, err := m.Invoke(context.Background(), Invocation{TypeID: "echo", Request: Request{Inputs: big}}); err != nil {
		t.Fatal(err)
	}
	if got := m.LastInstanceMemoryBytes(); got != 4*pageSize {
		t.Errorf("after a grown run: %d bytes, want %d", got, 4*pageSize)
	}
	if _, err := invoke(t, m, "counter", nil); err != nil {
		t.Fatal(err)
	}
	if got := m.LastInstanceMemoryBytes(); got != pageSize {
		t.Errorf("after a small run: %d bytes, want %d", got, pageSize)
	}
}

// TestWarmReady: the pool fills to its size, an invocation takes one
// instance and the pool makes it good; a pool of size 0 never holds one.
func TestWarmReady(t *testing.T) {
	none := load(t, "good_multi", LoadOptions{})
	if _, err := invoke(t, none, "counter", nil); err != nil {
		t.Fatal(err)
	}
	if got := none.WarmReady(); got != 0 {
		t.Errorf("no warm instances asked for: %d ready", got)
	}
	m := load(t, "good_multi", LoadOptions{WarmInstances: 3})
	waitReady(t, m, 3)
	if _, err := invoke(t, m, "counter", nil); err != nil {
		t.Fatal(err)
	}
	waitReady(t, m, 3)
	if got := m.open.Load(); got != 3 {
		t.Errorf("%d instances open after the refill, want the 3 warm ones", got)
	}
}

// waitReady waits until m's pool holds want instances, failing t after a
// few seconds.
func waitReady(t *testing.T, m *Module, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for m.WarmReady() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d warm instances ready after 5 s, want %d", m.WarmReady(), want)
		}
		time.Sleep(time.Millisecond)
	}
}
