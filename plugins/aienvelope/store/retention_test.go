package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// finished stores an envelope under key that finished at `at` in state.
func finished(t *testing.T, s *Store, key, state string, at time.Time, result []byte) {
	t.Helper()
	ctx := context.Background()
	e := &Envelope{Key: key, Digest: "d-" + key, ID: "env_" + key, Type: "t", Request: []byte(`{}`), CreatedAt: at.Add(-time.Second)}
	if _, ok, err := s.Claim(ctx, e); err != nil || !ok {
		t.Fatalf("claim %s: %v %v", key, ok, err)
	}
	var err error
	if state == StateCompleted {
		err = s.Complete(ctx, e.ID, result, at)
	} else {
		err = s.Fail(ctx, e.ID, []byte(`{"code":"provider_unavailable"}`), at)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func exists(t *testing.T, s *Store, key string) bool {
	t.Helper()
	_, err := s.Get(context.Background(), "env_"+key)
	if err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// An envelope that finished before the cutoff is deleted, completed or
// failed; one that finished at the cutoff or after it is kept.
func TestPruneAgeBoundary(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "env.db"))
	cutoff := time.UnixMilli(1_700_000_000_000)
	finished(t, s, "old-completed", StateCompleted, cutoff.Add(-time.Millisecond), []byte(`{}`))
	finished(t, s, "old-failed", StateFailed, cutoff.Add(-time.Hour), nil)
	finished(t, s, "at-cutoff", StateCompleted, cutoff, []byte(`{}`))
	finished(t, s, "young", StateFailed, cutoff.Add(time.Millisecond), nil)

	n, err := s.Prune(context.Background(), cutoff, 10)
	if err != nil || n != 2 {
		t.Fatalf("prune: %d %v, want 2 deleted", n, err)
	}
	for key, want := range map[string]bool{"old-completed": false, "old-failed": false, "at-cutoff": true, "young": true} {
		if got := exists(t, s, key); got != want {
			t.Errorf("%s: kept %v, want %v", key, got, want)
		}
	}
	if n, err := s.Prune(context.Background(), cutoff, 10); err != nil || n != 0 {
		t.Errorf("second prune: %d %v, want nothing", n, err)
	}
}

// A pending envelope is never pruned, however old: it is an async job
// still to run or a call still in progress.
func TestPruneKeepsPending(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "env.db"))
	long := time.UnixMilli(1_000_000_000_000)
	for _, async := range []bool{true, false} {
		key := fmt.Sprintf("pending-async-%v", async)
		if _, ok, err := s.Claim(ctx, &Envelope{Key: key, Digest: "d", ID: "env_" + key, Type: "t", Async: async, Request: []byte(`{}`), CreatedAt: long}); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
	}
	finished(t, s, "done", StateCompleted, long, []byte(`{}`))
	n, err := s.Prune(ctx, time.Now().Add(time.Hour), 10)
	if err != nil || n != 1 {
		t.Fatalf("prune: %d %v, want 1", n, err)
	}
	pend, err := s.Pending(ctx)
	if err != nil || len(pend) != 2 {
		t.Fatalf("pending after the prune: %d %v, want both", len(pend), err)
	}
	// The jobs can still finish.
	if err := s.Complete(ctx, "env_pending-async-true", []byte(`{}`), time.Now()); err != nil {
		t.Errorf("complete a job after the prune: %v", err)
	}
}

// A prune deletes in batches and lets other statements through between
// two of them: with the store's one connection, a prune held in one
// transaction would make the claim below wait until it ended.
func TestPruneInBatches(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "env.db"))
	old := time.UnixMilli(1_700_000_000_000)
	tx, err := s.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2500 {
		if _, err := tx.Exec(`INSERT INTO envelopes (key, digest, id, type, state, async, request, result, created_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?)`,
			fmt.Sprint("k", i), "d", fmt.Sprint("env_", i), "t", StateCompleted, false, []byte(`{}`), []byte(`{}`), old.UnixMilli(), old.UnixMilli()); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	batches := 0
	s.afterBatch = func() {
		batches++
		done := make(chan error, 1)
		go func() {
			_, _, err := s.Claim(ctx, &Envelope{Key: fmt.Sprint("between-", batches), Digest: "d", ID: fmt.Sprint("env_between_", batches),
				Type: "t", Request: []byte(`{}`), CreatedAt: time.Now()})
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("claim between batches: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a claim between two batches waited for the whole prune")
		}
	}
	n, err := s.Prune(ctx, old.Add(time.Millisecond), 1000)
	if err != nil || n != 2500 {
		t.Fatalf("prune: %d %v, want 2500", n, err)
	}
	if batches != 2 {
		t.Errorf("%d pauses between batches, want 2 (1000, 1000, 500)", batches)
	}
	if pend, _ := s.Pending(ctx); len(pend) != 2 {
		t.Errorf("the claims made between batches: %d pending, want 2", len(pend))
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Prune(cctx, time.Now(), 1000); !errors.Is(err, context.Canceled) {
		t.Errorf("prune with an ended context: %v", err)
	}
}

// A key whose envelope was pruned is free again: the same request is a
// new claim (the caller's retry runs again), and so is a different one.
func TestKeyAfterPruneIsClaimedAgain(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "env.db"))
	at := time.UnixMilli(1_700_000_000_000)
	finished(t, s, "k", StateCompleted, at, []byte(`{"text":"first"}`))
	same := &Envelope{Key: "k", Digest: "d-k", ID: "env_again", Type: "t", Request: []byte(`{}`), CreatedAt: at}
	if cur, ok, err := s.Claim(ctx, same); err != nil || ok || cur.ID != "env_k" {
		t.Fatalf("before the prune the key answers its envelope: %+v %v %v", cur, ok, err)
	}
	if n, err := s.Prune(ctx, at.Add(time.Millisecond), 100); err != nil || n != 1 {
		t.Fatalf("prune: %d %v", n, err)
	}
	if cur, ok, err := s.Claim(ctx, same); err != nil || !ok || cur != nil {
		t.Fatalf("after the prune the same request is claimed anew: %+v %v %v", cur, ok, err)
	}
	if _, err := s.Get(ctx, "env_k"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the pruned envelope: %v, want not found", err)
	}
}

// Deleting rows and reclaiming gives the space back to the file system
// for a new store; a store created without incremental auto-vacuum is
// converted by Vacuum.
func TestReclaimShrinksTheFile(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "env.db"))
	if inc, err := s.Incremental(ctx); err != nil || !inc {
		t.Fatalf("a new store is not incremental: %v %v", inc, err)
	}
	full := fill(t, s, 3000)
	if _, err := s.Prune(ctx, time.Now().Add(time.Hour), 1000); err != nil {
		t.Fatal(err)
	}
	if err := s.Reclaim(ctx); err != nil {
		t.Fatal(err)
	}
	after := size(t, s)
	if after*10 > full {
		t.Errorf("store is %d bytes after pruning every row, %d before", after, full)
	}
}

func TestVacuumConvertsAnOldStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "env.db")
	// A store as the previous version created it: no auto_vacuum.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(strings.Replace(schema, "CREATE INDEX IF NOT EXISTS envelopes_finished", "-- ", 1)); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := open(t, path)
	if inc, err := s.Incremental(ctx); err != nil || inc {
		t.Fatalf("the old store reads as incremental: %v %v", inc, err)
	}
	full := fill(t, s, 3000)
	if _, err := s.Prune(ctx, time.Now().Add(time.Hour), 1000); err != nil {
		t.Fatal(err)
	}
	if err := s.Reclaim(ctx); err != nil {
		t.Fatal(err)
	}
	if kept := size(t, s); kept < full/2 {
		t.Fatalf("without incremental vacuum the file kept %d of %d bytes; the test no longer shows the conversion", kept, full)
	}
	if err := s.Vacuum(ctx); err != nil {
		t.Fatal(err)
	}
	if inc, err := s.Incremental(ctx); err != nil || !inc {
		t.Errorf("after Vacuum: incremental %v %v", inc, err)
	}
	if after := size(t, s); after*10 > full {
		t.Errorf("store is %d bytes after Vacuum, %d before", after, full)
	}
}

// fill adds n completed envelopes with results of about 1.5 KB and
// returns the store's size on disk.
func fill(t *testing.T, s *Store, n int) int64 {
	t.Helper()
	result := []byte(`{"text":"` + strings.Repeat("x", 1500) + `"}`)
	tx, err := s.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := tx.Exec(`INSERT INTO envelopes (key, digest, id, type, state, async, request, result, created_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?)`,
			fmt.Sprint("fill-", i), "d", fmt.Sprint("env_fill_", i), "t", StateCompleted, false, result[:300], result, int64(i), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	return size(t, s)
}

func size(t *testing.T, s *Store) int64 {
	t.Helper()
	n, err := s.Size()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
