package dispatch

import (
	"crypto/rand"
	"encoding/base64"
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
	// CallTimeout, when set, bounds each host-service call of the run
	// from the call's arrival, within Deadline (CallDeadline): the host
	// sets it to call_timeout for a run whose caller set no deadline, so
	// that a hung plugin holds one call that long, not the whole run.
	CallTimeout time.Duration
	// Allowed reports whether the node may call family (and facet).
	Allowed func(family, facet string) bool
	// Traceparent and IdempotencyKey travel with every call of the run.
	Traceparent    string
	IdempotencyKey string
	// Token is the run's secret (NewRunToken). The host hands it to the
	// pack that runs the node and to every plugin called on the run's
	// behalf, in the call context, and a host-service call that names the
	// run is served only when it carries the token back (Binds): the run
	// id alone is no proof, since it is in logs, run records and API
	// answers. A run without a token binds no call.
	Token wop.RunToken
}

// CallContext returns the call context of a call made directly by the
// node. It carries the run's token, so it goes only to the processes that
// act in the run.
func (r *Run) CallContext(caller string) wop.CallContext {
	return wop.CallContext{
		RunID: r.ID, NodeID: r.NodeID, TypeID: r.TypeID, Pack: r.Pack, Caller: caller,
		Depth: 1, Deadline: r.Deadline, Traceparent: r.Traceparent, IdempotencyKey: r.IdempotencyKey,
		Token: r.Token,
	}
}

// CallDeadline is the deadline of a host-service call of the run that
// arrives at now asking for deadline (zero: none of its own): the earlier
// of that and, with CallTimeout set, now plus CallTimeout. It is never
// later than deadline, which the caller passes already held to the run's.
func (r *Run) CallDeadline(deadline, now time.Time) time.Time {
	if r.CallTimeout <= 0 {
		return deadline
	}
	if bound := now.Add(r.CallTimeout); deadline.IsZero() || bound.Before(deadline) {
		return bound
	}
	return deadline
}

// Binds reports whether a call that carries token may act in the run: the
// token is the run's, compared in constant time.
func (r *Run) Binds(token wop.RunToken) bool { return r.Token.Matches(token) }

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

// NewRunToken returns a fresh run token: 256 bits from crypto/rand, far
// beyond guessing within a run's lifetime.
func NewRunToken() wop.RunToken {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return wop.NewRunToken(base64.RawURLEncoding.EncodeToString(b[:]))
}

// NewID returns a random identifier with a prefix, e.g. "run_3f2a…".
func NewID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return prefix + "_" + hex.EncodeToString(b[:])
}
