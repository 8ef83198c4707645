package host

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/httpstatus"
	"github.com/wophost/wophost/core/idempotency"
	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/sdk/wop"
)

// newPostgresHost starts a host without capabilities or packs whose
// storage block names dsn.
func newPostgresHost(t *testing.T, dsn string) *Host {
	t.Helper()
	h := New(postgresConfig(t, dsn), config.NewLoader(), hclog.NewNullLogger(), "test")
	if rep := h.Start(context.Background()); rep.Fatal() {
		t.Fatalf("start: %v", rep.All())
	}
	t.Cleanup(h.Close)
	return h
}

func postgresConfig(t *testing.T, dsn string) *config.Config {
	return &config.Config{Host: config.Host{
		StateDir: t.TempDir(), MaxMessageBytes: 64 << 10, RunTimeout: time.Minute, Retention: config.DefaultRetention(),
		Storage: config.Storage{Backend: config.BackendPostgres, DSN: dsn, MaxConnections: 4, StatementTimeout: 5 * time.Second},
	}}
}

func testRecord(runID string) *RunRecord {
	return &RunRecord{RunID: runID, TypeID: "demo.node", Pack: "demo.pack", Input: json.RawMessage(`{"k": 1}`),
		StartedAt: time.Now().UTC(), FinishedAt: time.Now().UTC(), Outcome: OutcomeSucceeded}
}

// A run recorded by one host is found by its run id on another, byte for
// byte what the file would hold; a duplicate idempotency key through both
// hosts at once runs once, the other answered in flight, then replayed.
func TestPostgresTwoHostsShareState(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := newPostgresHost(t, dsn), newPostgresHost(t, dsn)
	ctx := context.Background()

	rec := testRecord("run_0123456789abcdef01234567")
	where, err := a.state.writeRunRecord(rec)
	if err != nil || where != rec.RunID {
		t.Fatalf("write = %q, %v; want the run id", where, err)
	}
	got, err := b.RunRecord(ctx, rec.RunID)
	if err != nil || got.TypeID != rec.TypeID || !strings.Contains(string(got.Input), `"k": 1`) {
		t.Fatalf("the other host's RunRecord = %+v, %v", got, err)
	}
	store, _ := b.state.runRecords(ctx)
	data, _ := store.get(ctx, rec.RunID)
	want, _ := encodeRunRecord(rec)
	if string(data) != string(want) {
		t.Fatalf("stored bytes differ from the file's:\n%s\nwant\n%s", data, want)
	}
	if _, err := b.RunRecord(ctx, "run_ffffffffffffffffffffffff"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("RunRecord of an unknown run = %v, want fs.ErrNotExist", err)
	}

	var runs atomic.Int64
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	run := func(h *Host) (*RunResult, error) {
		opts := RunOptions{IdempotencyKey: testKey}
		return h.state.runKeyed(ctx, "demo.node", json.RawMessage(`{}`), opts, time.Minute, func() (*RunResult, error) {
			n := runs.Add(1)
			started <- struct{}{}
			<-release
			return &RunResult{RunID: "run_00000000000000000000000" + string(rune('0'+n)), Output: json.RawMessage(`{"ok":true}`)}, nil
		})
	}
	var wg sync.WaitGroup
	var first *RunResult
	wg.Add(1)
	go func() {
		defer wg.Done()
		var err error
		if first, err = run(a); err != nil {
			t.Errorf("first run: %v", err)
		}
	}()
	<-started
	if _, err := run(b); wop.CodeOf(err) != idempotency.CodeInFlight {
		t.Fatalf("the duplicate through the other host = %v, want %s", err, idempotency.CodeInFlight)
	}
	close(release)
	wg.Wait()
	again, err := run(b)
	if err != nil || !again.Replayed || again.RunID != first.RunID || runs.Load() != 1 {
		t.Fatalf("repeat through the other host = %+v, %v (node ran %d times); want the first outcome replayed", again, err, runs.Load())
	}
}

// Retention applies to the table as to the files: the oldest records past
// max_run_records go, never one of a run in flight.
func TestPostgresRunRecordsPruned(t *testing.T) {
	h := newPostgresHost(t, pgtest.DSN(t))
	ctx := context.Background()
	clock := &testClock{t: time.Now().Add(-time.Hour)}
	pool, err := h.state.database(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store := &pgRunRecords{pool: pool, now: clock.now}
	for _, id := range []string{"run_01", "run_02", "run_03", "run_04"} {
		data, _ := encodeRunRecord(testRecord(id))
		if _, err := store.put(ctx, id, data); err != nil {
			t.Fatal(err)
		}
		clock.advance(time.Second)
	}
	inFlight := func(id string) bool { return id == "run_01" }
	removed, kept, err := store.prune(ctx, time.Now(), 24*time.Hour, 2, inFlight)
	if err != nil || removed != 2 || kept != 2 {
		t.Fatalf("prune = %d removed, %d kept, %v; want 2, 2", removed, kept, err)
	}
	for id, want := range map[string]bool{"run_01": true, "run_02": false, "run_03": false, "run_04": true} {
		_, err := store.get(ctx, id)
		if got := err == nil; got != want {
			t.Errorf("%s kept = %v, want %v (%v)", id, got, want, err)
		}
	}
	if removed, kept, err := store.prune(ctx, time.Now(), time.Minute, 10, nil); err != nil || removed != 2 || kept != 0 {
		t.Fatalf("prune by age = %d removed, %d kept, %v; want 2, 0", removed, kept, err)
	}
}

// While the database is down, new runs are refused before they start
// (retryable unavailable, details.storage "database", no dsn) and the host
// is not ready; once it is back, the same host accepts runs again.
func TestPostgresDatabaseDownRefusesRunsUntilBack(t *testing.T) {
	srv := pgtest.StartPrivate(t)
	h := newPostgresHost(t, srv.DSN())
	if err := h.Ready(); err != nil {
		t.Fatalf("Ready with the database up = %v", err)
	}
	keyed := func() error {
		_, err := h.state.runKeyed(context.Background(), "demo.node", json.RawMessage(`{}`), RunOptions{IdempotencyKey: testKey},
			time.Minute, func() (*RunResult, error) { return &RunResult{RunID: "run_01", Output: json.RawMessage(`{}`)}, nil })
		return err
	}

	srv.Stop()
	time.Sleep(storageCheckTTL + 100*time.Millisecond)
	for name, err := range map[string]error{"writable": h.state.writable(), "keyed run": keyed()} {
		we := wop.AsError(err)
		if err == nil || we.Code != wop.CodeUnavailable || !we.Retryable || !strings.Contains(string(we.Details), `"storage":"database"`) {
			t.Fatalf("%s with the database down = %v (%s); want a retryable unavailable naming the database", name, err, we.Details)
		}
		if strings.Contains(we.Message, "postgres://") || strings.Contains(we.Message, "127.0.0.1") {
			t.Fatalf("%s: the refusal names the connection: %s", name, we.Message)
		}
	}
	if status, env := httpstatus.Refusal(h.state.writable()); status != http.StatusServiceUnavailable || env.Error != httpstatus.CodeStorageUnavailable {
		t.Fatalf("HTTP answer with the database down = %d %s, want 503 %s", status, env.Error, httpstatus.CodeStorageUnavailable)
	}
	var se *StorageError
	if err := h.Ready(); !errors.As(err, &se) || se.Backend != config.BackendPostgres {
		t.Fatalf("Ready with the database down = %v, want a StorageError of the database", err)
	}
	if _, err := h.state.writeRunRecord(testRecord("run_02")); err == nil {
		t.Fatal("a run record was written with the database down")
	}

	srv.Start()
	deadline := time.Now().Add(10 * time.Second)
	for h.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the host did not recover: %v", h.Ready())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := keyed(); err != nil {
		t.Fatalf("keyed run after the database is back = %v", err)
	}
	if _, err := h.state.writeRunRecord(testRecord("run_03")); err != nil {
		t.Fatalf("run record after the database is back: %v", err)
	}
}

// A reload that keeps the storage block gives the new host a working pool
// of its own; closing the old host leaves it working.
func TestPostgresReloadKeepsStorageWorking(t *testing.T) {
	dsn := pgtest.DSN(t)
	h := newPostgresHost(t, dsn)
	if _, err := h.state.writeRunRecord(testRecord("run_01")); err != nil {
		t.Fatal(err)
	}
	next, rep, err := h.Reload(context.Background(), postgresConfig(t, dsn), config.NewLoader())
	if err != nil {
		t.Fatalf("reload: %v %v", err, rep.All())
	}
	t.Cleanup(next.Close)
	h.Close()
	if err := next.Ready(); err != nil {
		t.Fatalf("Ready after the reload = %v", err)
	}
	if _, err := next.RunRecord(context.Background(), "run_01"); err != nil {
		t.Fatalf("the record written before the reload: %v", err)
	}
	if _, err := next.state.writeRunRecord(testRecord("run_02")); err != nil {
		t.Fatalf("write after the reload: %v", err)
	}
}

// A reload whose storage block names another database opens a pool on it:
// the new host no longer sees the old database's records.
func TestPostgresReloadToAnotherDatabase(t *testing.T) {
	h := newPostgresHost(t, pgtest.DSN(t))
	if _, err := h.state.writeRunRecord(testRecord("run_01")); err != nil {
		t.Fatal(err)
	}
	next, rep, err := h.Reload(context.Background(), postgresConfig(t, pgtest.DSN(t)), config.NewLoader())
	if err != nil {
		t.Fatalf("reload: %v %v", err, rep.All())
	}
	t.Cleanup(next.Close)
	h.Close()
	if _, err := next.RunRecord(context.Background(), "run_01"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the old database's record after the reload = %v, want fs.ErrNotExist", err)
	}
	if _, err := next.state.writeRunRecord(testRecord("run_02")); err != nil {
		t.Fatalf("write after the reload: %v", err)
	}
}
