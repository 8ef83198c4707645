package host

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/httpstatus"
	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/sdk/wop"
)

// assertExpired checks that err is the run_expired answer for runID,
// pruned at prunedAt, and still a "no record" to errors.Is.
func assertExpired(t *testing.T, err error, runID string, prunedAt time.Time) {
	t.Helper()
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("get %s = %v; want an error matching fs.ErrNotExist", runID, err)
	}
	if !errors.Is(err, &wop.Error{Code: CodeRunExpired}) || wop.CodeOf(err) != CodeRunExpired {
		t.Fatalf("get %s = %v (code %q); want %s", runID, err, wop.CodeOf(err), CodeRunExpired)
	}
	var details struct {
		RunID    string    `json:"runId"`
		PrunedAt time.Time `json:"prunedAt"`
	}
	if err := json.Unmarshal(wop.AsError(err).Details, &details); err != nil {
		t.Fatalf("details of %v: %v", err, err)
	}
	if details.RunID != runID || !details.PrunedAt.Equal(prunedAt.Truncate(time.Second)) {
		t.Fatalf("details = %+v; want run %s pruned at %s", details, runID, prunedAt.UTC().Truncate(time.Second))
	}
	if status, env := httpstatus.Refusal(err); status != http.StatusGone || env.Error != CodeRunExpired {
		t.Fatalf("Refusal = %d %s; want 410 %s", status, env.Error, CodeRunExpired)
	}
}

// assertNeverRecorded checks that err is a plain "no record": not found,
// not run_expired.
func assertNeverRecorded(t *testing.T, err error, runID string) {
	t.Helper()
	var we *wop.Error
	if !errors.Is(err, fs.ErrNotExist) || errors.As(err, &we) {
		t.Fatalf("get %s = %v; want a plain fs.ErrNotExist", runID, err)
	}
}

// A pruned run's id answers run_expired; an id never written, not found;
// a kept record, its bytes.
func TestFileRunRecordsPrunedIsExpired(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().Truncate(time.Second)
	ids := writeRecords(t, dir, now, 10*24*time.Hour, time.Hour)
	store := &fileRunRecords{dir: dir}
	ctx := context.Background()
	if removed, kept, err := store.prune(ctx, now, 7*24*time.Hour, 100, nil); err != nil || removed != 1 || kept != 1 {
		t.Fatalf("prune = %d removed, %d kept, %v; want 1, 1", removed, kept, err)
	}
	_, err := store.get(ctx, ids[0])
	assertExpired(t, err, ids[0], now)
	if data, err := store.get(ctx, ids[1]); err != nil || len(data) == 0 {
		t.Fatalf("get of a kept record = %q, %v", data, err)
	}
	_, err = store.get(ctx, "run_ffffffffffffffffffffffff")
	assertNeverRecorded(t, err, "run_ffffffffffffffffffffffff")
	if got, _ := os.ReadDir(filepath.Join(dir, ExpiredDir)); len(got) != 1 || got[0].Name() != ids[0] {
		t.Fatalf("tombstones = %v; want one, %s", got, ids[0])
	}
}

// Host.RunRecord hands the store's run_expired on unchanged.
func TestRunRecordOfPrunedRunIsExpired(t *testing.T) {
	stateDir := t.TempDir()
	now := time.Now().Truncate(time.Second)
	ids := writeRecords(t, filepath.Join(stateDir, RunsDir), now, time.Hour)
	if _, _, err := pruneRunRecords(context.Background(), filepath.Join(stateDir, RunsDir), now, time.Minute, 100, nil); err != nil {
		t.Fatal(err)
	}
	h := New(&config.Config{Host: config.Host{
		StateDir: stateDir, MaxMessageBytes: 64 << 10, RunTimeout: time.Minute, Retention: config.DefaultRetention(),
	}}, config.NewLoader(), hclog.NewNullLogger(), "test")
	_, err := h.RunRecord(context.Background(), ids[0])
	assertExpired(t, err, ids[0], now)
	_, err = h.RunRecord(context.Background(), "run_ffffffffffffffffffffffff")
	assertNeverRecorded(t, err, "run_ffffffffffffffffffffffff")
}

// Tombstones are kept for maxAge after their pruning and at most maxCount
// of them, the oldest going first; an id whose tombstone went is not
// found again.
func TestFileTombstonesBounded(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().Truncate(time.Second)
	ctx := context.Background()
	ages := map[string]time.Duration{
		"run_a1": 10 * time.Hour, "run_a2": 5 * time.Hour, "run_a3": 3 * time.Hour, "run_a4": 2 * time.Hour, "run_a5": time.Hour,
	}
	for id, age := range ages {
		if err := writeFileTombstones(dir, []string{id}, now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	// By age: a1 is older than 6h.
	if removed, err := pruneFileTombstones(ctx, dir, now, 6*time.Hour, 100); err != nil || removed != 1 {
		t.Fatalf("prune by age = %d, %v; want 1", removed, err)
	}
	// By count: of the four left, the two oldest go.
	if removed, err := pruneFileTombstones(ctx, dir, now, 6*time.Hour, 2); err != nil || removed != 2 {
		t.Fatalf("prune by count = %d, %v; want 2", removed, err)
	}
	if got := remainingRecords(t, filepath.Join(dir, ExpiredDir)); !slices.Equal(got, []string{"run_a4", "run_a5"}) {
		t.Fatalf("tombstones left %v; want the two youngest", got)
	}
	store := &fileRunRecords{dir: dir}
	_, err := store.get(ctx, "run_a2")
	assertNeverRecorded(t, err, "run_a2")
	_, err = store.get(ctx, "run_a5")
	assertExpired(t, err, "run_a5", now.Add(-time.Hour))
	if removed, err := pruneFileTombstones(ctx, filepath.Join(dir, "missing"), now, time.Hour, 1); err != nil || removed != 0 {
		t.Fatalf("missing dir: %d, %v", removed, err)
	}
}

// Pruning bounds the tombstones with the retention's own age and count,
// and the tombstones it just wrote are the youngest.
func TestPruneRunRecordsBoundsTombstones(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().Truncate(time.Second)
	ctx := context.Background()
	if err := writeFileTombstones(dir, []string{"run_old"}, now.Add(-8*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := writeFileTombstones(dir, []string{"run_b1", "run_b2"}, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	ids := writeRecords(t, dir, now, 3*time.Hour, 2*time.Hour, time.Minute)
	// Keep 1 record: two records go, and of five tombstones the one past
	// 7 days goes, then the oldest until 1 is left.
	if removed, kept, err := pruneRunRecords(ctx, dir, now, 7*24*time.Hour, 1, nil); err != nil || removed != 2 || kept != 1 {
		t.Fatalf("prune = %d removed, %d kept, %v; want 2, 1", removed, kept, err)
	}
	got := remainingRecords(t, filepath.Join(dir, ExpiredDir))
	if len(got) != 1 || (got[0] != ids[0] && got[0] != ids[1]) {
		t.Fatalf("tombstones left %v; want one of the records just pruned", got)
	}
}

// A record goes only once its tombstone is written: when the tombstones
// cannot be written, every record stays.
func TestPruneRunRecordsKeepsRecordsWithoutTombstones(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ids := writeRecords(t, dir, now, 10*24*time.Hour, 9*24*time.Hour)
	// A file where the tombstones' directory should be.
	if err := os.WriteFile(filepath.Join(dir, ExpiredDir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	removed, kept, err := pruneRunRecords(context.Background(), dir, now, 7*24*time.Hour, 100, nil)
	if err == nil || removed != 0 || kept != 2 {
		t.Fatalf("prune = %d removed, %d kept, %v; want an error, nothing removed", removed, kept, err)
	}
	want := []string{ExpiredDir, ids[0] + ".json", ids[1] + ".json"}
	if got := remainingRecords(t, dir); !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
}

// A pruning interrupted between the tombstone and the removal leaves
// both: the record is still answered, and the next pruning removes it.
func TestTombstoneBeforeRemovalStillAnswersRecord(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().Truncate(time.Second)
	ids := writeRecords(t, dir, now, 10*24*time.Hour)
	if err := writeFileTombstones(dir, ids, now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	store := &fileRunRecords{dir: dir}
	ctx := context.Background()
	if data, err := store.get(ctx, ids[0]); err != nil || len(data) == 0 {
		t.Fatalf("get = %q, %v; want the record", data, err)
	}
	if removed, _, err := store.prune(ctx, now, 7*24*time.Hour, 100, nil); err != nil || removed != 1 {
		t.Fatalf("prune = %d, %v", removed, err)
	}
	_, err := store.get(ctx, ids[0])
	assertExpired(t, err, ids[0], now)
}

// With postgres, pruning moves a record to run_tombstones in one
// statement: the pruned id answers run_expired on every host, an unknown
// id not found, and the tombstones are bounded by age and count.
func TestPostgresRunRecordsTombstones(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := newPostgresHost(t, dsn), newPostgresHost(t, dsn)
	ctx := context.Background()
	pool, err := a.state.database(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{t: time.Now().Add(-time.Hour)}
	store := &pgRunRecords{pool: pool, now: clock.now}
	ids := []string{"run_01", "run_02", "run_03", "run_04"}
	for _, id := range ids {
		data, _ := encodeRunRecord(testRecord(id))
		if _, err := store.put(ctx, id, data); err != nil {
			t.Fatal(err)
		}
		clock.advance(time.Second)
	}
	now := time.Now().Truncate(time.Second)
	inFlight := func(id string) bool { return id == ids[3] }
	if removed, kept, err := store.prune(ctx, now, 30*time.Minute, 100, inFlight); err != nil || removed != 3 || kept != 1 {
		t.Fatalf("prune = %d removed, %d kept, %v; want 3, 1", removed, kept, err)
	}
	for _, id := range ids[:3] {
		_, err := store.get(ctx, id)
		assertExpired(t, err, id, now)
	}
	if _, err := store.get(ctx, ids[3]); err != nil {
		t.Fatalf("get of the kept record: %v", err)
	}
	// Host.RunRecord of another host on the database says the same.
	_, err = b.RunRecord(ctx, "run_01")
	assertExpired(t, err, "run_01", now)
	_, err = b.RunRecord(ctx, "run_ffffffffffffffffffffffff")
	assertNeverRecorded(t, err, "run_ffffffffffffffffffffffff")

	// A record pruned again (it was written again after its tombstone)
	// refreshes its tombstone rather than failing.
	data, _ := encodeRunRecord(testRecord("run_01"))
	if _, err := store.put(ctx, "run_01", data); err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Minute)
	if removed, _, err := store.prune(ctx, later, 30*time.Minute, 100, inFlight); err != nil || removed != 1 {
		t.Fatalf("prune again = %d, %v; want 1", removed, err)
	}
	_, err = store.get(ctx, "run_01")
	assertExpired(t, err, "run_01", later)

	// By count: at most 2 tombstones, the youngest (run_01, then run_03
	// by id) stay.
	if n, err := prunePgTombstones(ctx, pool, later, 24*time.Hour, 2); err != nil || n != 1 {
		t.Fatalf("prune tombstones by count = %d, %v; want 1", n, err)
	}
	_, err = store.get(ctx, "run_02")
	assertNeverRecorded(t, err, "run_02")
	_, err = store.get(ctx, "run_03")
	assertExpired(t, err, "run_03", now)
	// By age: a day and a minute on, run_03's tombstone is too old, and
	// run_01's not yet.
	if n, err := prunePgTombstones(ctx, pool, now.Add(24*time.Hour+30*time.Second), 24*time.Hour, 100); err != nil || n != 1 {
		t.Fatalf("prune tombstones by age = %d, %v; want 1", n, err)
	}
	_, err = store.get(ctx, "run_03")
	assertNeverRecorded(t, err, "run_03")
	_, err = store.get(ctx, "run_01")
	assertExpired(t, err, "run_01", later)
}
