package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/sdk/plugin"
)

// backendCases are the store implementations the contract tests run on;
// open returns a fresh store.
func backendCases() []struct {
	name string
	open func(t *testing.T) Backend
} {
	return []struct {
		name string
		open func(t *testing.T) Backend
	}{
		{"embedded", func(t *testing.T) Backend { return open(t, filepath.Join(t.TempDir(), "env.db")) }},
		{"postgres", func(t *testing.T) Backend { return openPostgres(t, 1, time.Minute)[0] }},
	}
}

// openPostgres returns n stores on one fresh database's schema, each with
// a pool and an owner id of its own, as n hosts would hold. It skips
// without a server.
func openPostgres(t *testing.T, n int, lease time.Duration) []*Postgres {
	t.Helper()
	settings := plugin.Storage{Backend: plugin.StoragePostgres, DSN: pgtest.DSN(t), MaxConnections: 8}
	const schema = "wophost_aienvelope"
	var out []*Postgres
	for range n {
		pool, err := pgstore.Open(context.Background(), settings, schema, Migrations())
		if err != nil {
			t.Fatal(err)
		}
		p := NewPostgres(pool, schema, PostgresOptions{Lease: lease})
		t.Cleanup(func() { p.Close() })
		out = append(out, p)
	}
	return out
}

func eachBackend(t *testing.T, fn func(t *testing.T, b Backend)) {
	for _, bc := range backendCases() {
		t.Run(bc.name, func(t *testing.T) { fn(t, bc.open(t)) })
	}
}

func envelope(key, digest, id string, async bool) *Envelope {
	return &Envelope{Key: key, Digest: digest, ID: id, Type: "t", Async: async, Request: []byte(`{"r":1}`), CreatedAt: time.UnixMilli(1_700_000_000_000)}
}

// The rules both backends keep: one row per key, a finish recorded once,
// a failed row replaced by the same request only, a released key free.
func TestBackendContract(t *testing.T) {
	eachBackend(t, func(t *testing.T, s Backend) {
		ctx := context.Background()
		if cur, ok, err := s.Claim(ctx, envelope("k1", "d1", "env_1", true)); err != nil || !ok || cur != nil {
			t.Fatalf("first claim: %v %v %v", cur, ok, err)
		}
		cur, ok, err := s.Claim(ctx, envelope("k1", "d2", "env_2", false))
		if err != nil || ok || cur.ID != "env_1" || cur.Digest != "d1" || cur.State != StatePending || !cur.Async || string(cur.Request) != `{"r":1}` {
			t.Fatalf("second claim: %+v %v %v", cur, ok, err)
		}
		if pend, err := s.Pending(ctx); err != nil || len(pend) != 1 || pend[0].ID != "env_1" {
			t.Fatalf("pending: %+v %v", pend, err)
		}
		at := time.UnixMilli(1_700_000_001_000)
		if err := s.Complete(ctx, "env_1", []byte(`{"ok":true}`), at); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, "env_1", []byte(`{}`), at); !errors.Is(err, ErrNotFound) {
			t.Errorf("completing twice: %v", err)
		}
		got, err := s.Get(ctx, "env_1")
		if err != nil || got.State != StateCompleted || string(got.Result) != `{"ok":true}` || !got.FinishedAt.Equal(at) {
			t.Fatalf("get: %+v %v", got, err)
		}
		if _, err := s.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown id: %v", err)
		}

		if _, _, err := s.Claim(ctx, envelope("k", "d", "a", false)); err != nil {
			t.Fatal(err)
		}
		if err := s.Fail(ctx, "a", []byte(`{"code":"x"}`), at); err != nil {
			t.Fatal(err)
		}
		if cur, ok, err := s.Claim(ctx, envelope("k", "other", "b", false)); err != nil || ok || cur.State != StateFailed {
			t.Fatalf("different request on a failed key: %+v %v %v", cur, ok, err)
		}
		if _, ok, err := s.Claim(ctx, envelope("k", "d", "c", false)); err != nil || !ok {
			t.Fatalf("same request on a failed key: %v %v", ok, err)
		}
		if err := s.Release(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.Claim(ctx, envelope("k", "z", "d", false)); err != nil || !ok {
			t.Fatalf("released key: %v %v", ok, err)
		}
	})
}

// Prune deletes the finished rows older than the cutoff, in batches, and
// never a pending one.
func TestBackendPrune(t *testing.T) {
	eachBackend(t, func(t *testing.T, s Backend) {
		ctx := context.Background()
		cutoff := time.UnixMilli(1_700_000_000_000)
		finish := func(key string, at time.Time, fail bool) {
			if _, ok, err := s.Claim(ctx, envelope(key, "d", "env_"+key, false)); err != nil || !ok {
				t.Fatalf("claim %s: %v %v", key, ok, err)
			}
			var err error
			if fail {
				err = s.Fail(ctx, "env_"+key, []byte(`{}`), at)
			} else {
				err = s.Complete(ctx, "env_"+key, []byte(`{}`), at)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		for i := range 5 {
			finish(fmt.Sprintf("old%d", i), cutoff.Add(-time.Duration(i+1)*time.Hour), i%2 == 0)
		}
		finish("at-cutoff", cutoff, false)
		finish("young", cutoff.Add(time.Millisecond), true)
		if _, _, err := s.Claim(ctx, envelope("pending", "d", "env_pending", true)); err != nil {
			t.Fatal(err)
		}
		n, err := s.Prune(ctx, cutoff, 2)
		if err != nil || n != 5 {
			t.Fatalf("prune: %d %v, want 5 deleted", n, err)
		}
		for _, key := range []string{"at-cutoff", "young", "pending"} {
			if _, err := s.Get(ctx, "env_"+key); err != nil {
				t.Errorf("%s: %v", key, err)
			}
		}
		if _, err := s.Get(ctx, "env_old3"); !errors.Is(err, ErrNotFound) {
			t.Errorf("old3 kept: %v", err)
		}
	})
}

// Two hosts claiming one key at once: exactly one inserts, every other
// claim reads its row.
func TestPostgresClaimAcrossHosts(t *testing.T) {
	hosts := openPostgres(t, 2, time.Minute)
	ctx := context.Background()
	for round := range 20 {
		key := fmt.Sprintf("k%d", round)
		var mu sync.Mutex
		claimed, seen := 0, map[string]bool{}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cur, ok, err := hosts[i%2].Claim(ctx, envelope(key, "d", fmt.Sprintf("env_%d_%d", round, i), false))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Error(err)
				case ok:
					claimed++
				default:
					seen[cur.ID] = true
				}
			}()
		}
		wg.Wait()
		if claimed != 1 || len(seen) != 1 {
			t.Fatalf("round %d: %d claims, others saw %v", round, claimed, seen)
		}
	}
}

// expire ends the leases of every pending row at once, as if their
// process had stopped renewing them a lease ago.
func expire(t *testing.T, p *Postgres) {
	t.Helper()
	if _, err := p.pool.Exec(context.Background(), `UPDATE envelopes SET lease_until = now() - interval '1 second' WHERE state = 'pending'`); err != nil {
		t.Fatal(err)
	}
}

// An async row whose lease passed is taken over by one sweeper, which
// then owns it: the first owner can no longer finish or release it. A
// sync row whose lease passed is released. A live lease is left alone.
func TestPostgresLeases(t *testing.T) {
	hosts := openPostgres(t, 2, time.Minute)
	a, b := hosts[0], hosts[1]
	ctx := context.Background()
	for _, e := range []*Envelope{envelope("job", "d", "env_job", true), envelope("call", "d", "env_call", false)} {
		if _, ok, err := a.Claim(ctx, e); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	if jobs, err := b.Sweep(ctx, 10); err != nil || len(jobs) != 0 {
		t.Fatalf("sweep of live leases took %+v %v", jobs, err)
	}
	if _, err := b.Get(ctx, "env_call"); err != nil {
		t.Fatalf("a live sync row was released: %v", err)
	}
	expire(t, a)
	jobs, err := b.Sweep(ctx, 10)
	if err != nil || len(jobs) != 1 || jobs[0].ID != "env_job" || string(jobs[0].Request) != `{"r":1}` {
		t.Fatalf("sweep: %+v %v", jobs, err)
	}
	if _, err := b.Get(ctx, "env_call"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the expired sync row is still there: %v", err)
	}
	if again, err := a.Sweep(ctx, 10); err != nil || len(again) != 0 {
		t.Fatalf("a second sweep took %+v %v", again, err)
	}
	if err := a.Complete(ctx, "env_job", []byte(`"a"`), time.Now()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the host that lost the lease completed: %v", err)
	}
	if err := a.Release(ctx, "env_job"); err != nil {
		t.Fatal(err)
	}
	if err := b.Complete(ctx, "env_job", []byte(`"b"`), time.Now()); err != nil {
		t.Fatalf("the new owner: %v", err)
	}
	if e, err := a.Get(ctx, "env_job"); err != nil || string(e.Result) != `"b"` {
		t.Fatalf("result %+v %v", e, err)
	}
}

// Renewing keeps a row its owner's past the first lease; Handback gives
// it to the next sweep at once.
func TestPostgresRenewAndHandback(t *testing.T) {
	hosts := openPostgres(t, 2, 300*time.Millisecond)
	a, b := hosts[0], hosts[1]
	ctx := context.Background()
	if _, _, err := a.Claim(ctx, envelope("job", "d", "env_job", true)); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		time.Sleep(100 * time.Millisecond)
		if err := a.Renew(ctx); err != nil {
			t.Fatal(err)
		}
		if jobs, err := b.Sweep(ctx, 10); err != nil || len(jobs) != 0 {
			t.Fatalf("sweep took a renewed row: %+v %v", jobs, err)
		}
	}
	if err := a.Handback(ctx); err != nil {
		t.Fatal(err)
	}
	if jobs, err := b.Sweep(ctx, 10); err != nil || len(jobs) != 1 {
		t.Fatalf("sweep after the handback: %+v %v", jobs, err)
	}
}

// Sweepers running at once take each expired job once between them.
func TestPostgresSweepersShareTheJobs(t *testing.T) {
	hosts := openPostgres(t, 4, time.Minute)
	ctx := context.Background()
	for i := range 40 {
		if _, _, err := hosts[0].Claim(ctx, envelope(fmt.Sprint(i), "d", fmt.Sprint("env_", i), true)); err != nil {
			t.Fatal(err)
		}
	}
	expire(t, hosts[0])
	var mu sync.Mutex
	taken := map[string]int{}
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 40 jobs need at most 14 sweeps of 3: more means taken twice.
			for range 20 {
				jobs, err := h.Sweep(ctx, 3)
				if err != nil {
					t.Error(err)
					return
				}
				if len(jobs) == 0 {
					return
				}
				mu.Lock()
				for _, j := range jobs {
					taken[j.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(taken) != 40 {
		t.Fatalf("%d jobs taken, want 40", len(taken))
	}
	for id, n := range taken {
		if n != 1 {
			t.Errorf("%s taken %d times", id, n)
		}
	}
}

// A finish in one process is announced to a listener in another.
func TestPostgresListen(t *testing.T) {
	hosts := openPostgres(t, 2, time.Minute)
	a, b := hosts[0], hosts[1]
	ctx, cancel := context.WithCancel(context.Background())
	woken := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() { done <- b.Listen(ctx, func() { woken <- struct{}{} }) }()
	select {
	case <-woken: // listening
	case err := <-done:
		t.Fatal(err)
	}
	if _, _, err := a.Claim(ctx, envelope("k", "d", "env_k", true)); err != nil {
		t.Fatal(err)
	}
	if err := a.Complete(ctx, "env_k", []byte(`{}`), time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification of the finish")
	}
	cancel()
	<-done
}
