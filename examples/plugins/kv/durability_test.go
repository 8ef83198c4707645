package main

import (
	"path/filepath"
	"testing"
)

// A put answers only once bbolt has synced its commit: the store's own
// database must not run with NoSync (nor skip the sync when the file
// grows). A kill test cannot see this, since the page cache outlives the
// process.
func TestStoreSyncsEveryCommit(t *testing.T) {
	s := openTestStore(t, filepath.Join(t.TempDir(), "kv.db"))
	t.Cleanup(func() { s.db.Close() })
	if s.db.NoSync || s.db.NoGrowSync {
		t.Errorf("the store runs with NoSync = %v, NoGrowSync = %v; a put could answer before it is on disk", s.db.NoSync, s.db.NoGrowSync)
	}
}
