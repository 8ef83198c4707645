package dispatch

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// Run is one node run in flight. Host-service calls are checked against
// the run the host recorded, never against what a caller claims.
type Run struct {
	ID       string
	NodeID   string
	TypeID   string
	Pack     string
	Deadline time.Time
	// Allowed reports whether the node may call family (and facet).
	Allowed func(family, facet string) bool
	// Traceparent and IdempotencyKey travel with every call of the run.
	Traceparent    string
	IdempotencyKey string
}

// CallContext returns the call context of a call made directly by the node.
func (r *Run) CallContext(caller string) wop.CallContext {
	return wop.CallContext{
		RunID: r.ID, NodeID: r.NodeID, TypeID: r.TypeID, Pack: r.Pack, Caller: caller,
		Depth: 1, Deadline: r.Deadline, Traceparent: r.Traceparent, IdempotencyKey: r.IdempotencyKey,
	}
}

// Runs is the table of runs in flight. It is safe for concurrent use.
type Runs struct {
	mu sync.RWMutex
	m  map[string]*Run
}

// NewRuns returns an empty table.
func NewRuns() *Runs { return &Runs{m: map[string]*Run{}} }

// Add records r and returns a function that removes it.
func (t *Runs) Add(r *Run) func() {
	t.mu.Lock()
	t.m[r.ID] = r
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.m, r.ID)
		t.mu.Unlock()
	}
}

// Get returns the run with id.
func (t *Runs) Get(id string) (*Run, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.m[id]
	return r, ok
}

// Len returns the number of runs in flight.
func (t *Runs) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}

// NewID returns a random identifier with a prefix, e.g. "run_3f2a…".
func NewID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return prefix + "_" + hex.EncodeToString(b[:])
}
