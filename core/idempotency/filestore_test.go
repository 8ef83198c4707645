package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wophost/wophost/internal/atomicfile"
	"github.com/wophost/wophost/sdk/wop"
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

func TestFileStoreClaimCompleteAndGet(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
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
	entries, _ := os.ReadDir(s.Dir())
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func TestFileStoreKeepsAnErrorOutcome(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
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
}

func TestFileStoreRelease(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
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
}

// Records that are no longer live give way to a new claim: a done record
// past the retention, and a pending claim past its lease (its host is
// gone). The owner of the replaced claim can then neither complete nor
// release it.
func TestFileStoreExpiredRecordsAreReplaced(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
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
}

// Of many concurrent claims of one key, from two stores over the same
// directory (two hosts, or two processes), exactly one is inserted.
func TestFileStoreConcurrentClaimsInsertOne(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	stores := []*FileStore{openStore(t, dir), openStore(t, dir)}
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
		if inserted != 1 || len(heldBy) != 1 {
			t.Fatalf("round %d: %d claims inserted, others saw owners %v; want exactly one", round, inserted, heldBy)
		}
	}
}

func TestFileStorePrune(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
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
		// The file's time is the record's age, as if written at `at`.
		if err := os.Chtimes(s.path(c.ID), at, at); err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	oldDone := put("key-old-done-aaaaaaaaaaaaa", old, StateDone, time.Minute)
	oldPending := put("key-old-pending-aaaaaaaaaa", old, StatePending, time.Minute)
	longLease := put("key-long-lease-aaaaaaaaaaa", old, StatePending, 2*testTTL)
	young := put("key-young-done-aaaaaaaaaaa", now.Add(-time.Hour), StateDone, time.Minute)

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
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("an old temporary file was kept: %v", err)
	}
	if _, err := os.Stat(freshTmp); err != nil {
		t.Errorf("a fresh temporary file (a write in progress) was removed: %v", err)
	}
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

func TestFileStoreRefusesBadIDs(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	for _, id := range []string{"", "../../etc/passwd", strings.Repeat("A", 64), strings.Repeat("a", 63)} {
		if _, err := s.Get(ctx, id); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q) = %v, want a refusal", id, err)
		}
		if _, err := s.Claim(ctx, pending(id, "o", time.Now()), time.Now(), testTTL); err == nil {
			t.Errorf("Claim(%q) accepted", id)
		}
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
