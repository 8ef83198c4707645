package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// figuresEnv, set to a row count, runs TestStoreFigures.
const figuresEnv = "AIENVELOPE_STORE_FIGURES"

// TestStoreFigures measures what retention does on disk, on the disk
// TMPDIR is on: the store's size with N completed envelopes of about
// 1.7 KB each, the time to prune them in the plugin's batches of 1000,
// and the size after Reclaim; then the same for a store created without
// incremental auto-vacuum, which keeps its size until Vacuum rewrites it.
// It is skipped unless AIENVELOPE_STORE_FIGURES is set to N:
//
//	AIENVELOPE_STORE_FIGURES=40000 go test -count=1 -v -run TestStoreFigures ./plugins/aienvelope/store/
func TestStoreFigures(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(figuresEnv))
	if n <= 0 {
		t.Skip("set " + figuresEnv + "=N to measure N rows")
	}
	ctx := context.Background()
	for _, old := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "env.db")
		kind := "new store (incremental auto-vacuum)"
		if old {
			kind = "store created without auto-vacuum"
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(schema); err != nil {
				t.Fatal(err)
			}
			db.Close()
		}
		s := open(t, path)
		t0 := time.Now()
		full := fillRealistic(t, s, n)
		t.Logf("%s: %d completed envelopes: %d bytes (%.1f MB, %d bytes a row), written in %s",
			kind, n, full, float64(full)/1e6, full/int64(n), time.Since(t0).Round(time.Millisecond))

		t0 = time.Now()
		var longest time.Duration
		last := t0
		s.afterBatch = func() {
			longest = max(longest, time.Since(last))
			last = time.Now()
		}
		deleted, err := s.Prune(ctx, time.UnixMilli(int64(n)+1), 1000)
		took := time.Since(t0)
		longest = max(longest, time.Since(last))
		if err != nil || deleted != n {
			t.Fatalf("prune: %d %v", deleted, err)
		}
		t.Logf("%s: prune of %d rows in batches of 1000: %s (%s per 10k rows, longest batch %s)", kind, n, took.Round(time.Millisecond),
			(took * 10000 / time.Duration(n)).Round(time.Millisecond), longest.Round(time.Millisecond))
		t0 = time.Now()
		if err := s.Reclaim(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: after Reclaim (%s): %d bytes", kind, time.Since(t0).Round(time.Millisecond), size(t, s))
		if old {
			t0 = time.Now()
			if err := s.Vacuum(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: after the one-time Vacuum (%s): %d bytes", kind, time.Since(t0).Round(time.Millisecond), size(t, s))
		}
	}

	// The one-time rewrite costs what the prune kept: the worst case is an
	// old store whose rows are all within the retention.
	path := filepath.Join(t.TempDir(), "env.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := open(t, path)
	full := fillRealistic(t, s, n)
	t0 := time.Now()
	if err := s.Vacuum(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("store created without auto-vacuum, nothing pruned: the one-time Vacuum of %d rows (%d bytes) took %s", n, full,
		time.Since(t0).Round(time.Millisecond))
}

// fillRealistic adds n completed envelopes shaped like real ones (a
// request of about 400 bytes, a result of about 1.2 KB) that finished at
// 1..n ms, in transactions of 1000, and returns the size on disk.
func fillRealistic(t *testing.T, s *Store, n int) int64 {
	t.Helper()
	req := []byte(`{"envelopeType":"answer","userMessage":"` + strings.Repeat("q", 330) + `","idempotencyKey":"k"}`)
	res := []byte(`{"envelopeType":"answer","status":"completed","text":"` + strings.Repeat("a", 1100) + `","finishReason":"stop"}`)
	for i := 0; i < n; {
		tx, err := s.db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for end := min(i+1000, n); i < end; i++ {
			if _, err := tx.Exec(`INSERT INTO envelopes (key, digest, id, type, state, async, request, result, created_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?)`,
				fmt.Sprintf("run_%024d", i), strings.Repeat("d", 64), fmt.Sprintf("env_%032x", i), "answer", StateCompleted, false, req, res, int64(i), int64(i+1)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	return size(t, s)
}
