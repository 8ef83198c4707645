package idempotency

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// backend is one Store implementation under the contract tests.
type backend struct {
	name string
	// open returns two stores over one storage, as two hosts sharing it
	// would have.
	open func(t *testing.T) (Store, Store)
	// age makes the record id look last written at `at`, for the file
	// store, which prunes by a file's age; the PostgreSQL store prunes by
	// the record's own times and needs nothing.
	age func(t *testing.T, s Store, id string, at time.Time)
}

func backends() []backend {
	return []backend{
		{
			name: "file",
			open: func(t *testing.T) (Store, Store) {
				dir := t.TempDir()
				return openStore(t, dir), openStore(t, dir)
			},
			age: func(t *testing.T, s Store, id string, at time.Time) {
				t.Helper()
				if err := os.Chtimes(s.(*FileStore).path(id), at, at); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "postgres",
			open: func(t *testing.T) (Store, Store) {
				dsn := pgtest.DSN(t)
				return NewPostgresStore(openPool(t, dsn)), NewPostgresStore(openPool(t, dsn))
			},
			age: func(*testing.T, Store, string, time.Time) {},
		},
	}
}

func openPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	s := pgstore.Settings{Backend: plugin.StoragePostgres, DSN: dsn, MaxConnections: 8, StatementTimeout: 5 * time.Second}
	pool, err := pgstore.Open(context.Background(), s, "wophost", Migrations())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// forEachBackend runs the contract test fn once per backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}
func TestStoreClaimCompleteAndGet(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.open(t)
		now := time.Now().UTC()
		id := ID("", "key-aaaaaaaaaaaaaaaaaaaaaa")
		if _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of a fresh key = %v, want ErrNotFound", err)
		}
		claim := pending(id, "owner-1", now)
		if held, err := s.Claim(ctx, claim, now, testTTL); err != nil || held != nil {
			t.Fatalf("first Claim = %v, %v; want inserted", held, err)
		}
		held, err := s.Claim(ctx, pending(id, "owner-2", now), now, testTTL)
		if err != nil || held == nil || held.Owner != "owner-1" || held.State != StatePending {
			t.Fatalf("second Claim = %+v, %v; want the first claim", held, err)
		}
		if err := s.Complete(ctx, done(pending(id, "owner-2", now), now, `{}`)); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("Complete by another owner = %v, want ErrNotOwner", err)
		}
		if err := s.Complete(ctx, done(claim, now, `{"v": 1}`)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, id)
		if err != nil || got.State != StateDone || string(got.Output) != `{"v":1}` || got.RunID != "run_1" {
			t.Fatalf("Get after Complete = %+v, %v", got, err)
		}
		if err := s.Release(ctx, id, "owner-1"); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("Release of a done record = %v, want ErrNotOwner", err)
		}
	})
}

func TestStoreKeepsAnErrorOutcome(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.open(t)
		now := time.Now().UTC()
		claim := pending(ID("", "key-bbbbbbbbbbbbbbbbbbbbbb"), "o", now)
		if _, err := s.Claim(ctx, claim, now, testTTL); err != nil {
			t.Fatal(err)
		}
		d := done(claim, now, "")
		d.Output, d.Error = nil, wop.Errorf("acme.key_not_found", "no value under key %q", "k").WithDetails(map[string]int{"n": 1})
		if err := s.Complete(ctx, d); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, claim.ID)
		if err != nil || got.Error == nil || got.Error.Code != "acme.key_not_found" || string(got.Error.Details) != `{"n":1}` || got.Output != nil {
			t.Fatalf("Get = %+v, %v", got, err)
		}
	})
}

func TestStoreRelease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.open(t)
		now := time.Now().UTC()
		id := ID("", "key-cccccccccccccccccccccc")
		if _, err := s.Claim(ctx, pending(id, "o1", now), now, testTTL); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, id, "someone-else"); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("Release by another owner = %v", err)
		}
		if err := s.Release(ctx, id, "o1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get after Release = %v", err)
		}
		if held, err := s.Claim(ctx, pending(id, "o2", now), now, testTTL); err != nil || held != nil {
			t.Fatalf("Claim after Release = %v, %v", held, err)
		}
	})
}

// Records that are no longer live give way to a new claim: a done record
// past the retention, and a pending claim past its lease (its host is
// gone). The owner of the replaced claim can then neither complete nor
// release it.
func TestStoreExpiredRecordsAreReplaced(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.open(t)
		start := time.Now().UTC()

		id := ID("", "key-dddddddddddddddddddddd")
		old := pending(id, "old", start)
		if _, err := s.Claim(ctx, old, start, testTTL); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, done(old, start, `1`)); err != nil {
			t.Fatal(err)
		}
		justBefore := start.Add(testTTL - time.Second)
		if held, _ := s.Claim(ctx, pending(id, "new", justBefore), justBefore, testTTL); held == nil || held.Owner != "old" {
			t.Fatalf("a done record within the retention was replaced: %+v", held)
		}
		later := start.Add(testTTL + time.Second)
		if held, err := s.Claim(ctx, pending(id, "new", later), later, testTTL); err != nil || held != nil {
			t.Fatalf("Claim over an expired record = %+v, %v; want inserted", held, err)
		}

		id2 := ID("", "key-eeeeeeeeeeeeeeeeeeeeee")
		abandoned := pending(id2, "gone", start)
		if _, err := s.Claim(ctx, abandoned, start, testTTL); err != nil {
			t.Fatal(err)
		}
		inLease := start.Add(30 * time.Second)
		if held, _ := s.Claim(ctx, pending(id2, "taker", inLease), inLease, testTTL); held == nil || held.Owner != "gone" {
			t.Fatalf("a claim within its lease was taken over: %+v", held)
		}
		afterLease := start.Add(2 * time.Minute)
		if held, err := s.Claim(ctx, pending(id2, "taker", afterLease), afterLease, testTTL); err != nil || held != nil {
			t.Fatalf("Claim over an abandoned claim = %+v, %v", held, err)
		}
		if err := s.Complete(ctx, done(abandoned, afterLease, `1`)); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("Complete by the replaced owner = %v, want ErrNotOwner", err)
		}
		if err := s.Release(ctx, id2, "gone"); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("Release by the replaced owner = %v, want ErrNotOwner", err)
		}
	})
}

// Of many concurrent claims of one key, from two stores over the same
// storage (two hosts, or two processes), exactly one is inserted; the
// others see it in flight.
func TestStoreConcurrentClaimsInsertOne(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		a, b2 := b.open(t)
		stores := []Store{a, b2}
		now := time.Now().UTC()
		for round := range 20 {
			id := ID("", fmt.Sprintf("key-concurrent-%08d", round))
			const n = 16
			var wg sync.WaitGroup
			var mu sync.Mutex
			inserted, heldBy := 0, map[string]int{}
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					held, err := stores[i%2].Claim(ctx, pending(id, fmt.Sprintf("o%d", i), now), now, testTTL)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err != nil:
						t.Errorf("Claim: %v", err)
					case held == nil:
						inserted++
					default:
						heldBy[held.Owner]++
					}
				}()
			}
			wg.Wait()
			if inserted != 1 || len(heldBy) != 1 || heldBy[winner(t, stores[0], id)] != n-1 {
				t.Fatalf("round %d: %d claims inserted, others saw owners %v; want exactly one", round, inserted, heldBy)
			}
		}
	})
}

func TestStorePrune(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.open(t)
		now := time.Now().UTC()
		old := now.Add(-testTTL - time.Hour)

		put := func(key string, at time.Time, state State, lease time.Duration) string {
			t.Helper()
			c := pending(ID("", key), "o", at)
			c.LeaseUntil = at.Add(lease)
			if _, err := s.Claim(ctx, c, at, testTTL); err != nil {
				t.Fatal(err)
			}
			if state == StateDone {
				if err := s.Complete(ctx, done(c, at, `1`)); err != nil {
					t.Fatal(err)
				}
			}
			b.age(t, s, c.ID, at)
			return c.ID
		}
		oldDone := put("key-old-done-aaaaaaaaaaaaa", old, StateDone, time.Minute)
		oldPending := put("key-old-pending-aaaaaaaaaa", old, StatePending, time.Minute)
		longLease := put("key-long-lease-aaaaaaaaaaa", old, StatePending, 2*testTTL)
		young := put("key-young-done-aaaaaaaaaaa", now.Add(-time.Hour), StateDone, time.Minute)

		removed, remaining, err := s.Prune(ctx, now, testTTL)
		if err != nil || removed != 2 || remaining != 2 {
			t.Fatalf("Prune = %d removed, %d remaining, %v; want 2, 2", removed, remaining, err)
		}
		for id, want := range map[string]bool{oldDone: false, oldPending: false, longLease: true, young: true} {
			_, err := s.Get(ctx, id)
			if got := err == nil; got != want {
				t.Errorf("record %s kept = %v, want %v (%v)", id[:8], got, want, err)
			}
		}
	})
}

func TestStoreRefusesBadIDs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.open(t)
		for _, id := range []string{"", "../../etc/passwd", strings.Repeat("A", 64), strings.Repeat("a", 63)} {
			if _, err := s.Get(ctx, id); err == nil || errors.Is(err, ErrNotFound) {
				t.Errorf("Get(%q) = %v, want a refusal", id, err)
			}
			if _, err := s.Claim(ctx, pending(id, "o", time.Now()), time.Now(), testTTL); err == nil {
				t.Errorf("Claim(%q) accepted", id)
			}
		}
	})
}

// winner is the owner of the claim holding id.
func winner(t *testing.T, s Store, id string) string {
	t.Helper()
	r, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Owner
}
