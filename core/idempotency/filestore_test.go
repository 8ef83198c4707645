package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/internal/atomicfile"
)

const testTTL = 24 * time.Hour

func openStore(t *testing.T, dir string) *FileStore {
	t.Helper()
	s, err := OpenFileStore(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pending(id, owner string, now time.Time) *Record {
	return &Record{ID: id, State: StatePending, Request: "sha256:r", TypeID: "a.b", Owner: owner,
		CreatedAt: now, LeaseUntil: now.Add(time.Minute)}
}

func done(claim *Record, now time.Time, output string) *Record {
	d := *claim
	d.State, d.CompletedAt, d.RunID, d.Output = StateDone, now, "run_1", json.RawMessage(output)
	return &d
}

// A record that cannot be read does not stop the pruning of the others,
// and once old it is removed too (and reported), so it cannot stay
// forever.
func TestFileStorePruneGoesOnPastABadRecord(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	now := time.Now().UTC()
	old := now.Add(-2 * testTTL)
	bad := s.path(ID("", "key-corrupt-aaaaaaaaaaaaaa"))
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := pending(ID("", "key-old-aaaaaaaaaaaaaaaaaa"), "o", old)
	if _, err := s.Claim(ctx, c, old, testTTL); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{bad, s.path(c.ID)} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	removed, remaining, err := s.Prune(ctx, now, testTTL)
	if err == nil || !strings.Contains(err.Error(), "unreadable") || removed != 2 || remaining != 0 {
		t.Fatalf("Prune = %d removed, %d remaining, %v; want 2, 0 and the bad record's error", removed, remaining, err)
	}
	if _, err := s.Get(ctx, c.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the good old record was kept: %v", err)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Fatalf("the unreadable old record was kept: %v", err)
	}
}

// A claim and an outcome are on disk before the store answers: the record
// and the directory entry that names it are synced before Claim and
// Complete return. A kill test cannot see a missing sync, since the page
// cache outlives the process, so the store reports each sync it made.
func TestFileStoreSyncsBeforeItAnswers(t *testing.T) {
	s := openStore(t, t.TempDir())
	var synced []string
	s.synced = func(path string) { synced = append(synced, path) }
	id := strings.Repeat("a", 64)
	now := time.Now().UTC()
	record := filepath.Join(s.Dir(), id+".json")
	check := func(op string) {
		t.Helper()
		fileAt, dirAt := -1, -1
		for i, p := range synced {
			if p == record && fileAt < 0 {
				fileAt = i
			}
			if p == s.Dir() && fileAt >= 0 && dirAt < 0 {
				dirAt = i
			}
		}
		if fileAt < 0 || dirAt < 0 {
			t.Errorf("%s answered having synced %v: want %s, then %s", op, synced, record, s.Dir())
		}
		synced = nil
	}
	claim := pending(id, "owner-1", now)
	if _, err := s.Claim(context.Background(), claim, now, testTTL); err != nil {
		t.Fatal(err)
	}
	check("Claim")
	if err := s.Complete(context.Background(), done(claim, now, `{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	check("Complete")
}

// Pruning removes the temporary files of interrupted writes once they are
// old, never one of a write in progress; a write leaves none behind.
func TestFileStoreTemporaryFiles(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	now := time.Now().UTC()
	old := now.Add(-testTTL - time.Hour)
	claim := pending(ID("", "key-aaaaaaaaaaaaaaaaaaaaaa"), "owner-1", now)
	if _, err := s.Claim(ctx, claim, now, testTTL); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, done(claim, now, `{"v": 1}`)); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(s.Dir())
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}

	tmp := filepath.Join(s.Dir(), atomicfile.TempPrefix+"x.json-1")
	freshTmp := filepath.Join(s.Dir(), atomicfile.TempPrefix+"y.json-2")
	for _, p := range []string{tmp, freshTmp} {
		if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(tmp, old, old); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Prune(ctx, now, testTTL); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("an old temporary file was kept: %v", err)
	}
	if _, err := os.Stat(freshTmp); err != nil {
		t.Errorf("a fresh temporary file (a write in progress) was removed: %v", err)
	}
}
