package store

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// statements records the SQL of every statement a pool sends: each is a
// round trip to the server.
type statements struct {
	mu  sync.Mutex
	sql []string
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sql = append(s.sql, data.SQL)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements sent since the last take.
func (s *statements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sql
	s.sql = nil
	return out
}

// openTraced returns a store whose statements are recorded, and a second
// store on the same schema that records nothing, to play another host.
func openTraced(t *testing.T) (*Postgres, *statements, *Postgres) {
	t.Helper()
	other := openPostgres(t, 1, time.Minute)[0]
	cfg := other.pool.Config()
	rec := &statements{}
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPostgres(pool, other.schema, other.opts)
	t.Cleanup(func() { p.Close() })
	return p, rec, other
}

// A claim of a new key is one statement, with no BEGIN or COMMIT around
// it; the row it leaves is pending, this process's and leased. Claiming
// the key again returns that row in one statement too.
func TestPostgresClaimIsOneStatement(t *testing.T) {
	p, rec, _ := openTraced(t)
	ctx := context.Background()
	if _, err := p.Get(ctx, "warm-up"); err == nil {
		t.Fatal("warm-up: found an envelope in a new schema")
	}
	rec.take()

	e := envelope("k1", "d1", "env_1", false)
	if cur, ok, err := p.Claim(ctx, e); err != nil || !ok || cur != nil {
		t.Fatalf("claim: %v %v %v", cur, ok, err)
	}
	if sent := rec.take(); len(sent) != 1 || !strings.HasPrefix(strings.TrimSpace(sent[0]), "WITH ins AS") {
		t.Fatalf("a new key's claim sent %d statements, want the one claim: %q", len(sent), sent)
	}
	if e.State != StatePending {
		t.Errorf("claimed envelope's state = %q", e.State)
	}
	var owner string
	var leased bool
	if err := p.pool.QueryRow(ctx, `SELECT owner, lease_until > now() FROM envelopes WHERE key = 'k1' AND state = 'pending'`).Scan(&owner, &leased); err != nil {
		t.Fatal(err)
	}
	if owner != p.Owner() || !leased {
		t.Errorf("claimed row: owner %q (want %q), lease ahead %v", owner, p.Owner(), leased)
	}
	rec.take()

	cur, ok, err := p.Claim(ctx, envelope("k1", "d2", "env_2", true))
	if err != nil || ok || cur.ID != "env_1" || cur.Digest != "d1" || cur.State != StatePending || cur.Async || string(cur.Request) != `{"r":1}` {
		t.Fatalf("second claim: %+v %v %v", cur, ok, err)
	}
	if sent := rec.take(); len(sent) != 1 {
		t.Fatalf("a taken key's claim sent %d statements, want 1: %q", len(sent), sent)
	}
	if _, err := p.Get(ctx, "env_2"); err == nil {
		t.Error("the second claim left a row of its own")
	}
}

// holdInsert inserts a pending row under key in a transaction of other's
// that stays open until the returned function ends it (commit or not).
func holdInsert(t *testing.T, other *Postgres, key, id string) func(commit bool) {
	t.Helper()
	ctx := context.Background()
	tx, err := other.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO envelopes (key, digest, id, type, state, async, request, created_at, owner, lease_until)
		VALUES ($1, 'd', $2, 't', 'pending', false, '\x7b7d', now(), $3, now() + interval '1 minute')`, key, id, other.Owner()); err != nil {
		t.Fatal(err)
	}
	ended := false
	t.Cleanup(func() {
		if !ended {
			_ = tx.Rollback(context.Background())
		}
	})
	return func(commit bool) {
		ended = true
		end := tx.Rollback
		if commit {
			end = tx.Commit
		}
		if err := end(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// waitForLockWaiter returns once a session of p's database waits for a
// lock: the claim waiting for the insert it conflicts with.
func waitForLockWaiter(t *testing.T, p *Postgres) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := p.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim never waited for the uncommitted insert")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type claimed struct {
	cur *Envelope
	ok  bool
	err error
}

// A claim that conflicts with a row another host commits while the claim
// runs does not see that row in its statement's snapshot: it claims
// nothing, errs nothing, and returns the row on its second statement. If
// the other host's insert rolls back instead, the claim inserts.
func TestPostgresClaimRacesAnUncommittedInsert(t *testing.T) {
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "commit", false: "rollback"}[commit]
		t.Run(name, func(t *testing.T) {
			p, rec, other := openTraced(t)
			ctx := context.Background()
			end := holdInsert(t, other, "k", "env_other")
			rec.take()

			done := make(chan claimed, 1)
			go func() {
				cur, ok, err := p.Claim(ctx, envelope("k", "d", "env_mine", false))
				done <- claimed{cur, ok, err}
			}()
			waitForLockWaiter(t, other)
			end(commit)
			var got claimed
			select {
			case got = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the claim did not return once the insert ended")
			}
			sent := rec.take()
			if commit {
				if got.err != nil || got.ok || got.cur == nil || got.cur.ID != "env_other" || got.cur.State != StatePending {
					t.Fatalf("claim after the other host committed: %+v", got)
				}
				if len(sent) != 2 {
					t.Errorf("the claim sent %d statements, want 2 (the first one's snapshot predates the commit): %q", len(sent), sent)
				}
				return
			}
			if got.err != nil || !got.ok || got.cur != nil {
				t.Fatalf("claim after the other host rolled back: %+v", got)
			}
			if len(sent) != 1 {
				t.Errorf("the claim sent %d statements, want 1: %q", len(sent), sent)
			}
			if e, err := other.Get(ctx, "env_mine"); err != nil || e.State != StatePending {
				t.Errorf("the claim's row: %+v %v", e, err)
			}
		})
	}
}
