package host

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/idempotency"
	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/sdk/wop"
)

// heldRun is a keyed run of demo.node through one host's state whose node
// waits until the test lets it answer.
type heldRun struct {
	started chan struct{}
	release chan struct{}
	done    chan struct{}
	res     *RunResult
	err     error
}

// startHeld runs key through s in the background; the node counts itself
// in runs and answers {"by": by} once released.
func startHeld(s *state, key, by string, runs *atomic.Int64) *heldRun {
	r := &heldRun{started: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.res, r.err = s.runKeyed(context.Background(), "demo.node", json.RawMessage(`{}`), RunOptions{IdempotencyKey: key}, time.Minute,
			func() (*RunResult, error) {
				runs.Add(1)
				close(r.started)
				<-r.release
				return &RunResult{RunID: "run_" + by, Output: json.RawMessage(`{"by":"` + by + `"}`)}, nil
			})
	}()
	return r
}

// finish lets the node answer and waits for the run's outcome.
func (r *heldRun) finish() (*RunResult, error) {
	close(r.release)
	<-r.done
	return r.res, r.err
}

// keyedOnce runs key through s with a node that answers at once, {"by": by}.
func keyedOnce(s *state, key, by string, runs *atomic.Int64) (*RunResult, error) {
	return s.runKeyed(context.Background(), "demo.node", json.RawMessage(`{}`), RunOptions{IdempotencyKey: key}, time.Minute,
		func() (*RunResult, error) {
			runs.Add(1)
			return &RunResult{RunID: "run_" + by, Output: json.RawMessage(`{"by":"` + by + `"}`)}, nil
		})
}

// Two hosts on one database, on one clock the test moves: a claim its host
// renews stays its host's past the lease it was made with; a claim its host
// stopped renewing is taken over by the other host after one lease, whose
// run is then the key's outcome, and the first host's late answer is not
// recorded over it.
func TestPostgresClaimFollowsItsHost(t *testing.T) {
	dsn := pgtest.DSN(t)
	clock := &testClock{t: time.Now()}
	// The clock is set before the host starts its maintenance, which reads it.
	started := func() *Host {
		h := New(postgresConfig(t, dsn), config.NewLoader(), hclog.NewNullLogger(), "test")
		h.state.now, h.state.health.now = clock.now, clock.now
		if rep := h.Start(context.Background()); rep.Fatal() {
			t.Fatalf("start: %v", rep.All())
		}
		t.Cleanup(h.Close)
		// The test renews when it means to: the host's own renewer,
		// whose ticks the test does not control, is stopped.
		h.state.cancel()
		return h
	}
	a, b := started(), started()
	lease := config.DefaultClaimLease
	if a.state.claims.lease != lease {
		t.Fatalf("claim lease %s, want the default %s", a.state.claims.lease, lease)
	}
	ctx := context.Background()

	t.Run("a renewed claim is not taken over", func(t *testing.T) {
		var runs atomic.Int64
		const key = "renewed-key-0123456789abcdef"
		r := startHeld(a.state, key, "a", &runs)
		<-r.started
		clock.advance(lease * 2 / 3)
		a.state.renewOnce(ctx)
		clock.advance(lease * 2 / 3) // past the first lease, within the renewed one
		if _, err := keyedOnce(b.state, key, "b", &runs); wop.CodeOf(err) != idempotency.CodeInFlight {
			t.Fatalf("the key through B while A renews its claim = %v, want %s", err, idempotency.CodeInFlight)
		}
		if res, err := r.finish(); err != nil || string(res.Output) != `{"by":"a"}` {
			t.Fatalf("A's run = %+v, %v", res, err)
		}
		again, err := keyedOnce(b.state, key, "b", &runs)
		if err != nil || !again.Replayed || again.RunID != "run_a" || runs.Load() != 1 {
			t.Fatalf("repeat through B = %+v, %v (node ran %d times); want A's outcome replayed", again, err, runs.Load())
		}
	})

	t.Run("a claim no longer renewed is taken over once, and its late outcome is not recorded", func(t *testing.T) {
		var runs atomic.Int64
		const key = "abandoned-key-0123456789abcd"
		r := startHeld(a.state, key, "a", &runs)
		<-r.started
		// A renews no more (as a host that died, or lost the database).
		clock.advance(lease + time.Second)
		taken, err := keyedOnce(b.state, key, "b", &runs)
		if err != nil || taken.Replayed || string(taken.Output) != `{"by":"b"}` {
			t.Fatalf("the key through B after A's lease = %+v, %v; want B's own run", taken, err)
		}
		a.state.renewOnce(ctx)
		if lost := a.state.claims.list(); len(lost) != 0 {
			t.Fatalf("A still renews %v after its claim was taken over", lost)
		}
		// A's run answers its own caller, but the key is B's.
		if res, err := r.finish(); err != nil || string(res.Output) != `{"by":"a"}` {
			t.Fatalf("A's run = %+v, %v", res, err)
		}
		for name, h := range map[string]*Host{"A": a, "B": b} {
			again, err := keyedOnce(h.state, key, "late", &runs)
			if err != nil || !again.Replayed || again.RunID != "run_b" {
				t.Fatalf("repeat through %s = %+v, %v; want B's outcome", name, again, err)
			}
		}
		if n := runs.Load(); n != 2 {
			t.Fatalf("the node ran %d times, want twice (A's, then B's once)", n)
		}
	})
}

// lostLeaser is a leased store whose every renewal finds its claims taken
// over, and whose writes fail as if the database were out of reach: the
// outcome of a claim found lost must be neither written nor kept to be
// written later.
type lostLeaser struct {
	idempotency.Store
	mu        sync.Mutex
	completes int
}

func (l *lostLeaser) Renew(context.Context, []idempotency.Held, time.Time) (map[string]bool, error) {
	return map[string]bool{}, nil
}

func (l *lostLeaser) Complete(context.Context, *idempotency.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.completes++
	return errors.New("connection refused")
}

func TestKeyedLostClaimIsNeitherWrittenNorKept(t *testing.T) {
	f := newKeyedFixture(t)
	st, err := f.s.idempotencyStore()
	if err != nil {
		t.Fatal(err)
	}
	store := &lostLeaser{Store: st}
	f.s.store = store
	var runs atomic.Int64
	r := startHeld(f.s, testKey, "stale", &runs)
	<-r.started
	f.s.renewOnce(context.Background())
	if res, err := r.finish(); err != nil || string(res.Output) != `{"by":"stale"}` {
		t.Fatalf("the run's own answer = %+v, %v", res, err)
	}
	if store.completes != 0 || f.s.unsavedRecord(idempotency.ID("", testKey)) != nil {
		t.Fatalf("the outcome of a lost claim was written %d times or kept in memory", store.completes)
	}
	if f.obs.get("failed:"+StoreIdempotencyKeys) != 0 {
		t.Fatalf("a lost claim was reported as a failed write: %v", f.obs.snapshot())
	}
}

// A host keeps no record of a claim once its run settled: nothing is
// renewed, and a store whose claims are not leased (the embedded one)
// holds a claim for the run's deadline plus a grace, as before.
func TestKeyedClaimLeases(t *testing.T) {
	f := newKeyedFixture(t)
	clock := f.clock()
	start := clock.now().UTC()
	var runs atomic.Int64
	r := startHeld(f.s, testKey, "embedded", &runs)
	<-r.started
	rec, err := f.s.store.Get(context.Background(), idempotency.ID("", testKey))
	if err != nil || !rec.LeaseUntil.Equal(start.Add(time.Minute+leaseGrace)) {
		t.Fatalf("embedded claim = %+v, %v; want a lease of the run's bound plus %s", rec, err, leaseGrace)
	}
	if held := f.s.claims.list(); len(held) != 0 {
		t.Fatalf("an embedded claim is renewed: %v", held)
	}
	if _, err := r.finish(); err != nil {
		t.Fatal(err)
	}

	leased := newKeyedFixture(t)
	clock = leased.clock()
	st, _ := leased.s.idempotencyStore()
	store := &lostLeaser{Store: st}
	leased.s.store = store
	start = clock.now().UTC()
	r = startHeld(leased.s, testKey, "leased", &runs)
	<-r.started
	rec, err = st.Get(context.Background(), idempotency.ID("", testKey))
	if err != nil || !rec.LeaseUntil.Equal(start.Add(config.DefaultClaimLease)) {
		t.Fatalf("leased claim = %+v, %v; want a lease of %s", rec, err, config.DefaultClaimLease)
	}
	if held := leased.s.claims.list(); len(held) != 1 || held[0].Owner != rec.Owner {
		t.Fatalf("claims renewed while the run goes on = %v, want %s", held, rec.Owner)
	}
	r.finish()
	if held := leased.s.claims.list(); len(held) != 0 {
		t.Fatalf("claims still renewed after the run = %v", held)
	}
}
