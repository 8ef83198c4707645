package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/internal/atomicfile"
)

// writeRecords writes one run record per age into dir, each file's time
// set to now minus its age, and returns their run ids in order.
func writeRecords(t *testing.T, dir string, now time.Time, ages ...time.Duration) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, len(ages))
	for i, age := range ages {
		id := fmt.Sprintf("run_%024d", i)
		path := filepath.Join(dir, id+".json")
		if err := os.WriteFile(path, []byte(`{"runId":"`+id+`"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		at := now.Add(-age)
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// remainingRecords lists the files in dir; the tombstones' directory is
// not one.
func remainingRecords(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && e.Name() == ExpiredDir {
			continue
		}
		out = append(out, e.Name())
	}
	return out
}

func TestPruneRunRecordsByAge(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ids := writeRecords(t, dir, now, 10*24*time.Hour, 8*24*time.Hour, 6*24*time.Hour, time.Hour)
	removed, kept, err := pruneRunRecords(context.Background(), dir, now, 7*24*time.Hour, 100, nil)
	if err != nil || removed != 2 || kept != 2 {
		t.Fatalf("prune = %d removed, %d kept, %v; want 2, 2", removed, kept, err)
	}
	if got, want := remainingRecords(t, dir), []string{ids[2] + ".json", ids[3] + ".json"}; !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
}

// Past max_run_records the oldest go first, whatever their names say.
func TestPruneRunRecordsByCountOldestFirst(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	// Names in one order, ages in another: record 2 is the oldest.
	ids := writeRecords(t, dir, now, 3*time.Hour, 1*time.Hour, 5*time.Hour, 2*time.Hour, 4*time.Hour)
	removed, kept, err := pruneRunRecords(context.Background(), dir, now, 7*24*time.Hour, 2, nil)
	if err != nil || removed != 3 || kept != 2 {
		t.Fatalf("prune = %d removed, %d kept, %v; want 3, 2", removed, kept, err)
	}
	if got, want := remainingRecords(t, dir), []string{ids[1] + ".json", ids[3] + ".json"}; !slices.Equal(got, want) {
		t.Fatalf("left %v, want the two youngest %v", got, want)
	}
}

// The record of a run in flight is never pruned, neither by age nor by
// count; the count is met with other records where it can be.
func TestPruneRunRecordsKeepsRunsInFlight(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ids := writeRecords(t, dir, now, 30*24*time.Hour, 20*24*time.Hour, time.Hour, time.Minute)
	inFlight := func(id string) bool { return id == ids[0] }
	removed, kept, err := pruneRunRecords(context.Background(), dir, now, 7*24*time.Hour, 1, inFlight)
	if err != nil || removed != 3 || kept != 1 {
		t.Fatalf("prune = %d removed, %d kept, %v; want 3, 1", removed, kept, err)
	}
	if got := remainingRecords(t, dir); !slices.Equal(got, []string{ids[0] + ".json"}) {
		t.Fatalf("left %v, want only the record of the run in flight", got)
	}
}

// Only run records and old temporaries are touched; a missing directory
// holds nothing.
func TestPruneRunRecordsLeavesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	old := now.Add(-30 * 24 * time.Hour)
	for _, name := range []string{"notes.txt", "run_x.json.bak", "other.json", atomicfile.TempPrefix + "run_a.json-1", atomicfile.TempPrefix + "run_b.json-2"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(dir, name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	fresh := filepath.Join(dir, atomicfile.TempPrefix+"run_b.json-2")
	if err := os.Chtimes(fresh, now, now); err != nil {
		t.Fatal(err)
	}
	if removed, _, err := pruneRunRecords(context.Background(), dir, now, time.Hour, 1, nil); err != nil || removed != 0 {
		t.Fatalf("prune = %d, %v", removed, err)
	}
	want := []string{atomicfile.TempPrefix + "run_b.json-2", "notes.txt", "other.json", "run_x.json.bak"}
	if got := remainingRecords(t, dir); !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
	if removed, kept, err := pruneRunRecords(context.Background(), filepath.Join(dir, "missing"), now, time.Hour, 1, nil); err != nil || removed+kept != 0 {
		t.Fatalf("missing dir: %d %d %v", removed, kept, err)
	}
}

// A host prunes at start, in the background, and stops at close.
func TestStatePrunesAtStart(t *testing.T) {
	stateDir := t.TempDir()
	now := time.Now()
	ids := writeRecords(t, filepath.Join(stateDir, RunsDir), now, 10*24*time.Hour, time.Hour)
	cfg := config.Host{StateDir: stateDir, MaxMessageBytes: 64 << 10, RunTimeout: time.Minute, Retention: config.DefaultRetention()}
	obs := &countingObserver{}
	s := newStateFor(cfg, hclog.NewNullLogger(), func(string) bool { return false }, func() StateObserver { return obs })
	s.start()
	deadline := time.Now().Add(10 * time.Second)
	for len(remainingRecords(t, filepath.Join(stateDir, RunsDir))) != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	s.close()
	if got := remainingRecords(t, filepath.Join(stateDir, RunsDir)); !slices.Equal(got, []string{ids[1] + ".json"}) {
		t.Fatalf("left %v", got)
	}
	if obs.get("pruned:run_records") != 1 {
		t.Fatalf("observer saw %v", obs.snapshot())
	}
	s.close() // twice is harmless
}
