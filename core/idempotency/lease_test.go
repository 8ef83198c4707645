package idempotency

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wophost/wophost/internal/pgtest"
)

var _ Leaser = (*PostgresStore)(nil)

// twoHosts returns two PostgreSQL stores over one fresh database, as two
// hosts sharing it have.
func twoHosts(t *testing.T) (*PostgresStore, *PostgresStore) {
	t.Helper()
	dsn := pgtest.DSN(t)
	return NewPostgresStore(openPool(t, dsn)), NewPostgresStore(openPool(t, dsn))
}

// claimFor claims id for owner at now with a lease of lease; the claim
// must be inserted.
func claimFor(t *testing.T, s Store, id, owner string, now time.Time, lease time.Duration) *Record {
	t.Helper()
	c := pending(id, owner, now)
	c.LeaseUntil = now.Add(lease)
	if held, err := s.Claim(context.Background(), c, now, testTTL); err != nil || held != nil {
		t.Fatalf("claim of %s by %s = %+v, %v; want inserted", id[:8], owner, held, err)
	}
	return c
}

// Of many hosts that find one claim's lease lapsed at once, exactly one
// takes the key over; the others see its new claim in flight.
func TestPostgresLapsedClaimIsTakenOverOnce(t *testing.T) {
	a, b := twoHosts(t)
	stores := []Store{a, b}
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Microsecond) // PostgreSQL keeps microseconds
	const lease = 30 * time.Second
	for round := range 10 {
		id := ID("", fmt.Sprintf("key-lapsed-%08d-aaaaaaaa", round))
		claimFor(t, a, id, "dead-host", start, lease)
		// Just past the lease, as a dead host's claim is.
		at := start.Add(lease + time.Millisecond)
		const takers = 12
		var wg sync.WaitGroup
		var mu sync.Mutex
		took, sawOwner := []string{}, map[string]int{}
		for i := range takers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fmt.Sprintf("taker-%d", i)
				c := pending(id, owner, at)
				c.LeaseUntil = at.Add(lease)
				held, err := stores[i%2].Claim(ctx, c, at, testTTL)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("Claim: %v", err)
				case held == nil:
					took = append(took, owner)
				default:
					sawOwner[held.Owner]++
				}
			}()
		}
		wg.Wait()
		if len(took) != 1 || sawOwner[took[0]] != takers-1 || len(sawOwner) != 1 {
			t.Fatalf("round %d: %v took the key over, the others saw %v; want exactly one taker", round, took, sawOwner)
		}
		if w := winner(t, b, id); w != took[0] {
			t.Fatalf("round %d: the key is held by %s, the taker was %s", round, w, took[0])
		}
	}
}

// A claim whose host renews it is not taken over when the lease it was
// made with lapses, and its renewed lease is what every host reads.
func TestPostgresRenewedClaimIsNotTakenOver(t *testing.T) {
	a, b := twoHosts(t)
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Microsecond) // PostgreSQL keeps microseconds
	id := ID("", "key-renewed-aaaaaaaaaaaaaaaaaa")
	other := ID("", "key-renewed-bbbbbbbbbbbbbbbbbb")
	c := claimFor(t, a, id, "live-host", start, time.Second)
	claimFor(t, a, other, "other-claim", start, time.Second)

	renewedUntil := start.Add(time.Minute)
	got, err := a.Renew(ctx, []Held{{ID: id, Owner: "live-host"}, {ID: other, Owner: "not-its-owner"}}, renewedUntil)
	if err != nil || len(got) != 1 || !got["live-host"] {
		t.Fatalf("Renew = %v, %v; want only live-host renewed", got, err)
	}
	// Past the first lease, within the renewed one.
	at := start.Add(2 * time.Second)
	held, err := b.Claim(ctx, pending(id, "taker", at), at, testTTL)
	if err != nil || held == nil || held.Owner != "live-host" || !held.LeaseUntil.Equal(renewedUntil) {
		t.Fatalf("Claim over a renewed claim = %+v, %v; want live-host's claim until %s", held, err, renewedUntil)
	}
	// The claim whose owner did not match was not renewed: it lapses.
	if held, err := b.Claim(ctx, pending(other, "taker", at), at, testTTL); err != nil || held != nil {
		t.Fatalf("Claim over a claim renewed under another owner = %+v, %v; want taken over", held, err)
	}
	// A renewal never shortens a lease.
	if _, err := a.Renew(ctx, []Held{{ID: id, Owner: "live-host"}}, start); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Get(ctx, id); err != nil || !r.LeaseUntil.Equal(renewedUntil) {
		t.Fatalf("lease after an earlier renewal = %+v, %v; want %s", r, err, renewedUntil)
	}
	if err := a.Complete(ctx, done(c, at, `{"by":"live-host"}`)); err != nil {
		t.Fatal(err)
	}
	// A done record is not pending: there is nothing left to renew.
	if got, err := a.Renew(ctx, []Held{{ID: id, Owner: "live-host"}}, start.Add(time.Hour)); err != nil || len(got) != 0 {
		t.Fatalf("Renew of a completed claim = %v, %v; want nothing renewed", got, err)
	}
	if got, err := a.Renew(ctx, []Held{{ID: "../x", Owner: "o"}}, start); err == nil {
		t.Fatalf("Renew of a bad id = %v; want a refusal", got)
	}
}

// The host whose claim was taken over learns it at its next renewal, and
// can neither complete nor release the claim of the new owner, whether
// the new owner's run is still going or finished.
func TestPostgresStaleOwnerCannotCompleteOverTheNewOwner(t *testing.T) {
	a, b := twoHosts(t)
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Microsecond) // PostgreSQL keeps microseconds
	id := ID("", "key-stale-owner-aaaaaaaaaaaaaa")
	stale := claimFor(t, a, id, "stale-host", start, time.Second)
	at := start.Add(2 * time.Second)
	fresh := claimFor(t, b, id, "new-host", at, time.Minute)

	if got, err := a.Renew(ctx, []Held{{ID: id, Owner: "stale-host"}}, at.Add(time.Hour)); err != nil || len(got) != 0 {
		t.Fatalf("stale Renew = %v, %v; want nothing renewed", got, err)
	}
	if r, err := b.Get(ctx, id); err != nil || r.Owner != "new-host" || !r.LeaseUntil.Equal(at.Add(time.Minute)) {
		t.Fatalf("after the stale renewal: %+v, %v; want new-host's claim and lease untouched", r, err)
	}
	if err := a.Complete(ctx, done(stale, at, `{"by":"stale-host"}`)); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("stale Complete while the new owner runs = %v, want ErrNotOwner", err)
	}
	if err := a.Release(ctx, id, "stale-host"); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("stale Release = %v, want ErrNotOwner", err)
	}
	if err := b.Complete(ctx, done(fresh, at, `{"by":"new-host"}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Complete(ctx, done(stale, at, `{"by":"stale-host"}`)); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("stale Complete after the new owner's = %v, want ErrNotOwner", err)
	}
	r, err := a.Get(ctx, id)
	if err != nil || r.State != StateDone || r.Owner != "new-host" || string(r.Output) != `{"by":"new-host"}` {
		t.Fatalf("record = %+v, %v; want new-host's outcome", r, err)
	}
}

// A renewal racing takeovers of a lapsed claim: either the renewal wins
// and nobody takes the key over, or one taker wins and the renewal
// reports the claim lost; never both, never two takers.
func TestPostgresRenewalRacingTakeovers(t *testing.T) {
	a, b := twoHosts(t)
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Microsecond) // PostgreSQL keeps microseconds
	at := start.Add(2 * time.Second)
	renewWins, takeWins := 0, 0
	for round := range 20 {
		id := ID("", fmt.Sprintf("key-race-%08d-aaaaaaaaaa", round))
		claimFor(t, a, id, "slow-host", start, time.Second)
		var wg sync.WaitGroup
		var mu sync.Mutex
		renewed, took := false, 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := a.Renew(ctx, []Held{{ID: id, Owner: "slow-host"}}, at.Add(time.Minute))
			if err != nil {
				t.Errorf("Renew: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			renewed = got["slow-host"]
		}()
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := pending(id, fmt.Sprintf("taker-%d", i), at)
				c.LeaseUntil = at.Add(time.Minute)
				held, err := b.Claim(ctx, c, at, testTTL)
				if err != nil {
					t.Errorf("Claim: %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				if err == nil && held == nil {
					took++
				}
			}()
		}
		wg.Wait()
		switch {
		case renewed && took == 0:
			renewWins++
		case !renewed && took == 1:
			takeWins++
		default:
			t.Fatalf("round %d: renewed %v and %d takeovers; want exactly one winner", round, renewed, took)
		}
	}
	t.Logf("the renewal won %d rounds, a takeover %d", renewWins, takeWins)
}
