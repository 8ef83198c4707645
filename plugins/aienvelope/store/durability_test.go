package store

import (
	"context"
	"path/filepath"
	"testing"
)

// The store answers for an envelope only once it is on disk: every
// commit syncs the WAL (synchronous = FULL), read back through the
// store's own connection. A kill test cannot see this, since the page
// cache outlives the process.
func TestStoreSyncsEveryCommit(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "envelopes.db"))
	var sync int
	var journal string
	ctx := context.Background()
	if err := s.db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&journal); err != nil {
		t.Fatal(err)
	}
	// 2 is FULL; NORMAL (1) in WAL mode may lose the last commits when
	// the machine fails.
	if sync != 2 || journal != "wal" {
		t.Errorf("synchronous = %d, journal_mode = %s; want 2 (FULL) and wal", sync, journal)
	}
}
