package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/internal/pgtest"
)

// twoHosts returns two stores on one fresh database, each with a pool of
// its own, as two hosts hold them, sharing clock c.
func twoHosts(t *testing.T, c *clock) (a, b *Postgres, dsn string) {
	t.Helper()
	dsn = pgtest.DSN(t)
	return openPostgres(t, dsn, c), openPostgres(t, dsn, c), dsn
}

// race makes n calls of fn at once, call i through a when i is even and
// through b when it is odd. Every pooled connection is opened first, so
// that the calls start together rather than one connection setup apart.
func race(t *testing.T, n int, a, b *Postgres, fn func(i int, s *Postgres)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range []*Postgres{a, b} {
		for range s.pool.Config().MaxConns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.pool.Exec(context.Background(), `SELECT pg_sleep(0.05)`); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i, []*Postgres{a, b}[i%2])
		}()
	}
	close(start)
	wg.Wait()
}

// tally counts the answers of racing calls: accepted ones by the id they
// answered, refusals with the expected error, and anything else (reported).
type tally struct {
	mu      sync.Mutex
	ids     map[string]int
	created int
	refused int
}

func (ta *tally) add(t *testing.T, id string, created bool, err, refusal error) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	switch {
	case err == nil:
		if ta.ids == nil {
			ta.ids = map[string]int{}
		}
		ta.ids[id]++
		if created {
			ta.created++
		}
	case refusal != nil && errors.Is(err, refusal):
		ta.refused++
	default:
		t.Error(err)
	}
}

// One quota holds for every host: spawns racing through two stores never
// create more instances than it allows.
func TestPostgresSpawnQuotaAcrossHosts(t *testing.T) {
	a, b, _ := twoHosts(t, newClock())
	const quota, spawns = 5, 20
	var ta tally
	race(t, spawns, a, b, func(i int, s *Postgres) {
		inst, created, err := s.CreateInstance(context.Background(), NewInstance{
			ManifestID: "m", ManifestDigest: "d", Manifest: []byte(`{}`),
			IdempotencyKey: fmt.Sprint("k", i), RequestDigest: "r",
		}, quota)
		ta.add(t, inst.ID, created, err, ErrSpawnQuota)
	})
	if ta.created != quota || ta.refused != spawns-quota {
		t.Fatalf("created %d, refused %d; want %d, %d", ta.created, ta.refused, quota, spawns-quota)
	}
	var n int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM instances`).Scan(&n); err != nil || n != quota {
		t.Fatalf("instances stored = %d, %v; want %d", n, err, quota)
	}
}

// A spawn key names one instance whichever host receives it, even with no
// quota to serialise the spawns; a different request under the key is
// refused on either host.
func TestPostgresSpawnKeyAcrossHosts(t *testing.T) {
	a, b, _ := twoHosts(t, newClock())
	in := NewInstance{ManifestID: "m", ManifestDigest: "d", Manifest: []byte(`{}`), IdempotencyKey: "k", RequestDigest: "r"}
	var ta tally
	race(t, 10, a, b, func(_ int, s *Postgres) {
		inst, created, err := s.CreateInstance(context.Background(), in, 0)
		ta.add(t, inst.ID, created, err, nil)
	})
	if len(ta.ids) != 1 || ta.created != 1 {
		t.Fatalf("instances answered %v, created %d; want one instance, created once", ta.ids, ta.created)
	}
	in.RequestDigest = "other"
	for _, s := range []*Postgres{a, b} {
		if _, _, err := s.CreateInstance(context.Background(), in, 0); !errors.Is(err, ErrIdempotencyMismatch) {
			t.Fatalf("reused key: %v", err)
		}
	}
}

// Claimers on two hosts racing over one mailbox each take a message at
// most once; acknowledged messages are never delivered again.
func TestPostgresClaimOnceAcrossHosts(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	a, b, _ := twoHosts(t, c)
	to := spawn(t, a, "to").ID
	const n = 60
	for i := range n {
		if _, _, err := send(a, to, "x", fmt.Sprint("k", i), fmt.Sprint(i), 0); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	race(t, 8, a, b, func(_ int, s *Postgres) {
		for {
			got, err := s.Claim(ctx, to, 2, time.Hour)
			if err != nil || len(got) == 0 {
				if err != nil {
					t.Error(err)
				}
				return
			}
			mu.Lock()
			for _, m := range got {
				seen[m.ID]++
			}
			mu.Unlock()
			if err := s.Ack(ctx, ids(got)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	if len(seen) != n {
		t.Fatalf("claimed %d distinct messages; want %d", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("message %s claimed %d times", id, k)
		}
	}
	c.advance(2 * time.Hour)
	for _, s := range []*Postgres{a, b} {
		if got, err := s.Claim(ctx, to, 0, time.Hour); err != nil || len(got) != 0 {
			t.Fatalf("claim after ack = %d, %v; want none", len(got), err)
		}
		if q, _ := s.Queued(ctx, to); q != 0 {
			t.Fatalf("queued after ack = %d", q)
		}
	}
}

// A host claiming from a mailbox does not wait for a claim another host
// is taking at that moment: it takes the messages that are free.
func TestPostgresClaimSkipsRowsBeingClaimed(t *testing.T) {
	ctx := context.Background()
	a, b, _ := twoHosts(t, newClock())
	to := spawn(t, a, "to").ID
	for i := range 3 {
		if _, _, err := send(a, to, "x", fmt.Sprint("k", i), fmt.Sprint(i), 0); err != nil {
			t.Fatal(err)
		}
	}
	// B's claim of the oldest message, caught between locking its row
	// and committing.
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT seq FROM messages WHERE idempotency_key = 'k0' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	got, err := a.Claim(wait, to, 0, time.Minute)
	if err != nil {
		t.Fatalf("claim beside another host's claim: %v", err)
	}
	if keys := msgKeys(got); keys != "k1,k2" {
		t.Fatalf("claim beside another host's claim = %s; want k1,k2", keys)
	}
}

// A message claimed by a host that then goes silent is delivered again,
// through another host, once its lease ends, and not before; the silent
// host can no longer acknowledge or release the new claim.
func TestPostgresLeaseRedeliversAcrossHosts(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	a, b, _ := twoHosts(t, c)
	to := spawn(t, a, "to").ID
	if _, _, err := send(a, to, "x", "k", `1`, 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.Claim(ctx, to, 0, time.Minute); len(got) != 1 {
		t.Fatalf("claim through A = %d", len(got))
	}
	if got, _ := b.Claim(ctx, to, 0, time.Minute); len(got) != 0 {
		t.Fatalf("claim through B during A's lease = %d; want 0", len(got))
	}
	c.advance(time.Minute)
	got, err := b.Claim(ctx, to, 0, time.Minute)
	if err != nil || len(got) != 1 || got[0].Attempts != 2 {
		t.Fatalf("claim through B after A's lease = %+v, %v; want the message, attempt 2", got, err)
	}
	// A wakes up: its release and ack no longer touch B's claim.
	if err := a.Release(ctx, ids(got)); err != nil {
		t.Fatal(err)
	}
	if again, _ := a.Claim(ctx, to, 0, time.Minute); len(again) != 0 {
		t.Fatalf("A's stale release freed B's claim: claimed %d", len(again))
	}
	if err := a.Ack(ctx, ids(got)); err != nil {
		t.Fatal(err)
	}
	if q, _ := a.Queued(ctx, to); q != 1 {
		t.Fatalf("A's stale ack acknowledged B's claim: queued %d", q)
	}
	if err := b.Ack(ctx, ids(got)); err != nil {
		t.Fatal(err)
	}
	c.advance(time.Hour)
	if again, _ := a.Claim(ctx, to, 0, time.Minute); len(again) != 0 {
		t.Fatalf("acknowledged message delivered again: %d", len(again))
	}
}

// A key sent through two hosts at once is one message; a bound mailbox
// takes no more than its capacity from both together.
func TestPostgresMailboxDedupAndBoundAcrossHosts(t *testing.T) {
	ctx := context.Background()
	a, b, _ := twoHosts(t, newClock())
	to := spawn(t, a, "to").ID
	var same tally
	race(t, 10, a, b, func(_ int, s *Postgres) {
		m, dup, err := send(s, to, "x", "same", `"same"`, 0)
		same.add(t, m.ID, !dup, err, nil)
	})
	if q, _ := a.Queued(ctx, to); len(same.ids) != 1 || same.created != 1 || q != 1 {
		t.Fatalf("same key through two hosts: answered %v, accepted %d, queued %d; want one message", same.ids, same.created, q)
	}

	const capacity = 7
	var ta tally
	race(t, 20, a, b, func(i int, s *Postgres) {
		m, dup, err := send(s, to, fmt.Sprint("s", i), fmt.Sprint("k", i), "1", capacity)
		ta.add(t, m.ID, !dup, err, ErrMailboxFull)
	})
	if ta.created != capacity-1 || ta.refused != 20-(capacity-1) {
		t.Fatalf("accepted %d, full %d; want %d, %d", ta.created, ta.refused, capacity-1, 20-(capacity-1))
	}
	if q, _ := b.Queued(ctx, to); q != capacity {
		t.Fatalf("queued = %d; want %d", q, capacity)
	}
}

// Opening a store interrupts the tasks of hosts that are gone, never those
// of a host still running.
func TestPostgresTasksOfLiveHostsKept(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	a, b, dsn := twoHosts(t, c)
	inst := spawn(t, a, "i").ID
	if err := a.StartTask(ctx, "tsk_a", KindDelegation, inst, TaskWorking, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.StartTask(ctx, "tsk_b", KindDelegation, inst, TaskWorking, nil); err != nil {
		t.Fatal(err)
	}
	b.Close()
	openPostgres(t, dsn, c)
	if task, _ := a.Task(ctx, "tsk_a"); task.Status != TaskWorking {
		t.Fatalf("a live host's task = %q, want %q", task.Status, TaskWorking)
	}
	if task, _ := a.Task(ctx, "tsk_b"); task.Status != TaskInterrupted {
		t.Fatalf("a gone host's task = %q, want %q", task.Status, TaskInterrupted)
	}
	if got, _ := a.InFlight(ctx, []string{inst}); got[inst] != 1 {
		t.Fatalf("InFlight = %v; want the live task only", got)
	}
}

// With the database down, every call fails with an error pgstore reports
// unavailable, and works again once it is back.
func TestPostgresDatabaseDown(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.StartPrivate(t)
	s := openPostgres(t, srv.DSN(), newClock())
	to := spawn(t, s, "to").ID
	srv.Stop()
	calls := map[string]func() error{
		"CreateInstance": func() error {
			_, _, err := s.CreateInstance(ctx, NewInstance{IdempotencyKey: "k2"}, 5)
			return err
		},
		"Instance": func() error { _, err := s.Instance(ctx, to); return err },
		"Enqueue":  func() error { _, _, err := send(s, to, "x", "k", "1", 5); return err },
		"Claim":    func() error { _, err := s.Claim(ctx, to, 0, time.Minute); return err },
		"Ack":      func() error { return s.Ack(ctx, []string{"msg_x"}) },
		"StartTask": func() error {
			return s.StartTask(ctx, "tsk_1", KindDelegation, to, TaskWorking, nil)
		},
		"InFlight": func() error { _, err := s.InFlight(ctx, []string{to}); return err },
	}
	for name, call := range calls {
		if err := call(); !pgstore.Unavailable(err) {
			t.Errorf("%s with the database down: %v; want an unavailable error", name, err)
		}
	}
	srv.Start()
	if _, _, err := send(s, to, "x", "k", "1", 5); err != nil {
		t.Fatalf("send once the database is back: %v", err)
	}
}
