package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
}

func open(t *testing.T, path string, c *clock) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, Options{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func spawn(t *testing.T, s Backend, key string) Instance {
	t.Helper()
	inst, _, err := s.CreateInstance(context.Background(), NewInstance{
		ManifestID: "m", ManifestDigest: "sha256:d", Manifest: []byte(`{}`), IdempotencyKey: key, RequestDigest: "r-" + key,
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

func TestMigrationsVersionedAndIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.db")
	c := newClock()
	s := open(t, path, c)
	v, err := s.SchemaVersion(context.Background())
	if err != nil || v != len(migrations) {
		t.Fatalf("schema version = %d, %v; want %d", v, err, len(migrations))
	}
	s.Close()
	s = open(t, path, c)
	if v, _ := s.SchemaVersion(context.Background()); v != len(migrations) {
		t.Fatalf("schema version after reopen = %d", v)
	}
	var mode string
	if err := s.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	var busy int
	if err := s.db.QueryRow(`PRAGMA busy_timeout`).Scan(&busy); err != nil || busy != 5000 {
		t.Errorf("busy_timeout = %d, %v; want 5000", busy, err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.db")
	s := open(t, path, newClock())
	if _, err := s.db.Exec(`INSERT INTO schema_migrations VALUES (99, 0)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(context.Background(), path, Options{}); err == nil {
		t.Fatal("opened a database with a newer schema")
	}
}

func TestCreateInstanceIdempotentAndQuota(t *testing.T) {
	eachBackend(t, testCreateInstanceIdempotentAndQuota)
}

func testCreateInstanceIdempotentAndQuota(t *testing.T, bc backendCase) {
	ctx := context.Background()
	c := newClock()
	s, _ := bc.open(t, c)
	in := NewInstance{ManifestID: "m", ManifestDigest: "sha256:d", Manifest: []byte(`{"id":"m"}`), Config: []byte(`{"x":1}`), IdempotencyKey: "k1", RequestDigest: "r1"}
	a, created, err := s.CreateInstance(ctx, in, 2)
	if err != nil || !created {
		t.Fatalf("first spawn: %v %v", created, err)
	}
	b, created, err := s.CreateInstance(ctx, in, 2)
	if err != nil || created || b.ID != a.ID {
		t.Fatalf("repeated spawn = %+v %v %v; want the first instance", b, created, err)
	}
	in2 := in
	in2.RequestDigest = "other"
	if _, _, err := s.CreateInstance(ctx, in2, 2); !errors.Is(err, ErrIdempotencyMismatch) {
		t.Fatalf("reused key: %v", err)
	}
	in3 := in
	in3.IdempotencyKey = "k2"
	if _, _, err := s.CreateInstance(ctx, in3, 2); err != nil {
		t.Fatal(err)
	}
	in4 := in
	in4.IdempotencyKey = "k3"
	if _, _, err := s.CreateInstance(ctx, in4, 2); !errors.Is(err, ErrSpawnQuota) {
		t.Fatalf("over quota: %v", err)
	}
	// A repeat of an accepted spawn still answers at the quota.
	if got, _, err := s.CreateInstance(ctx, in, 2); err != nil || got.ID != a.ID {
		t.Fatalf("repeat at quota: %v", err)
	}
	got, err := s.Instance(ctx, a.ID)
	if err != nil || string(got.Manifest) != `{"id":"m"}` || string(got.Config) != `{"x":1}` || !got.SpawnedAt.Equal(c.now()) {
		t.Fatalf("Instance = %+v, %v", got, err)
	}
	if _, err := s.Instance(ctx, "agt_nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown instance: %v", err)
	}
}

func TestTasksAndInFlight(t *testing.T) {
	eachBackend(t, testTasksAndInFlight)
}

func testTasksAndInFlight(t *testing.T, bc backendCase) {
	ctx := context.Background()
	c := newClock()
	s, another := bc.open(t, c)
	a, b := spawn(t, s, "a"), spawn(t, s, "b")
	if err := s.StartTask(ctx, "tsk_1", KindDelegation, a.ID, TaskWorking, []byte(`"t"`)); err != nil {
		t.Fatal(err)
	}
	if err := s.StartTask(ctx, "tsk_2", KindDelegation, a.ID, TaskWorking, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Enqueue(ctx, NewMessage{To: b.ID, From: "x", Channel: "c", Content: []byte(`1`), IdempotencyKey: "m1", RequestDigest: "d"}, 0); err != nil {
		t.Fatal(err)
	}
	got, err := s.InFlight(ctx, []string{a.ID, b.ID, "agt_none"})
	if err != nil || got[a.ID] != 2 || got[b.ID] != 1 || got["agt_none"] != 0 {
		t.Fatalf("InFlight = %v, %v", got, err)
	}
	if err := s.FinishTask(ctx, "tsk_1", TaskCompleted, []byte(`"done"`), nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.InFlight(ctx, []string{a.ID}); got[a.ID] != 1 {
		t.Fatalf("InFlight after finish = %v", got)
	}
	task, err := s.Task(ctx, "tsk_1")
	if err != nil || task.Status != TaskCompleted || string(task.Output) != `"done"` || string(task.Input) != `"t"` {
		t.Fatalf("Task = %+v, %v", task, err)
	}
	if err := s.FinishTask(ctx, "tsk_none", TaskCompleted, nil, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("finish unknown task: %v", err)
	}
	// A task left working by a dead process is interrupted on reopen and
	// no longer counts as work in flight.
	s.Close()
	s = another()
	task, _ = s.Task(ctx, "tsk_2")
	if task.Status != TaskInterrupted {
		t.Fatalf("left-over task status = %q, want %q", task.Status, TaskInterrupted)
	}
	if got, _ := s.InFlight(ctx, []string{a.ID}); got[a.ID] != 0 {
		t.Fatalf("InFlight after reopen = %v", got)
	}
}

func send(s Backend, to, from, key, content string, capacity int) (Message, bool, error) {
	return s.Enqueue(context.Background(), NewMessage{
		To: to, From: from, Channel: "c", Content: []byte(content), IdempotencyKey: key, RequestDigest: "d:" + content,
	}, capacity)
}

func TestMailboxFIFODedupBound(t *testing.T) {
	eachBackend(t, testMailboxFIFODedupBound)
}

func testMailboxFIFODedupBound(t *testing.T, bc backendCase) {
	ctx := context.Background()
	s, _ := bc.open(t, newClock())
	to := spawn(t, s, "to").ID
	// Two senders interleaved.
	order := []struct{ from, key string }{{"x", "x1"}, {"y", "y1"}, {"x", "x2"}, {"y", "y2"}, {"x", "x3"}}
	for _, o := range order {
		if _, dup, err := send(s, to, o.from, o.key, `"`+o.key+`"`, 5); err != nil || dup {
			t.Fatalf("send %s: %v %v", o.key, dup, err)
		}
	}
	// Full at capacity, and retrying does not change that.
	if _, _, err := send(s, to, "x", "x4", `"x4"`, 5); !errors.Is(err, ErrMailboxFull) {
		t.Fatalf("send over capacity: %v", err)
	}
	// A resent key is accepted as a duplicate even when full.
	m, dup, err := send(s, to, "y", "y1", `"y1"`, 5)
	if err != nil || !dup || string(m.Content) != `"y1"` {
		t.Fatalf("resend: %+v %v %v", m, dup, err)
	}
	if _, _, err := send(s, to, "y", "y1", `"other"`, 5); !errors.Is(err, ErrIdempotencyMismatch) {
		t.Fatalf("reused key: %v", err)
	}
	if _, _, err := send(s, "agt_none", "x", "k", `1`, 5); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown recipient: %v", err)
	}
	got, err := s.Claim(ctx, to, 3, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if keys := msgKeys(got); keys != "x1,y1,x2" {
		t.Fatalf("first claim = %s", keys)
	}
	// Claimed messages are held: a second reader gets the rest.
	rest, _ := s.Claim(ctx, to, 0, time.Minute)
	if keys := msgKeys(rest); keys != "y2,x3" {
		t.Fatalf("second claim = %s", keys)
	}
	if err := s.Ack(ctx, ids(got)); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Queued(ctx, to); n != 2 {
		t.Fatalf("queued after ack = %d", n)
	}
	// Room again; a delivered key is still deduplicated.
	if _, dup, err := send(s, to, "x", "x1", `"x1"`, 5); err != nil || !dup {
		t.Fatalf("resend of delivered: %v %v", dup, err)
	}
	if _, _, err := send(s, to, "x", "x4", `"x4"`, 5); err != nil {
		t.Fatalf("send after ack: %v", err)
	}
	// Released messages come back first, in their order.
	if err := s.Release(ctx, ids(rest)); err != nil {
		t.Fatal(err)
	}
	again, _ := s.Claim(ctx, to, 0, time.Minute)
	if keys := msgKeys(again); keys != "y2,x3,x4" {
		t.Fatalf("claim after release = %s", keys)
	}
	if again[0].Attempts != 2 || again[2].Attempts != 1 {
		t.Errorf("attempts = %d, %d; want 2, 1", again[0].Attempts, again[2].Attempts)
	}
}

func TestClaimLeaseExpires(t *testing.T) {
	eachBackend(t, testClaimLeaseExpires)
}

func testClaimLeaseExpires(t *testing.T, bc backendCase) {
	ctx := context.Background()
	c := newClock()
	s, _ := bc.open(t, c)
	to := spawn(t, s, "to").ID
	if _, _, err := send(s, to, "x", "k", `1`, 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Claim(ctx, to, 0, time.Minute); len(got) != 1 {
		t.Fatalf("claim = %d", len(got))
	}
	if got, _ := s.Claim(ctx, to, 0, time.Minute); len(got) != 0 {
		t.Fatalf("claim while held = %d", len(got))
	}
	c.advance(time.Minute)
	if got, _ := s.Claim(ctx, to, 0, time.Minute); len(got) != 1 {
		t.Fatalf("claim after lease = %d", len(got))
	}
}

// An accepted message survives closing the store without acknowledging it
// (what a killed process leaves behind) and is delivered again, claims
// released, after reopening.
func TestMailboxSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	c := newClock()
	s := open(t, path, c)
	to := spawn(t, s, "to").ID
	for i := range 3 {
		if _, _, err := send(s, to, "x", fmt.Sprint("k", i), fmt.Sprint(i), 0); err != nil {
			t.Fatal(err)
		}
	}
	claimed, _ := s.Claim(ctx, to, 2, time.Hour)
	if err := s.Ack(ctx, ids(claimed[:1])); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = open(t, path, c)
	got, err := s.Claim(ctx, to, 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if keys := msgKeys(got); keys != "k1,k2" {
		t.Fatalf("after reopen = %s; want k1,k2", keys)
	}
	if _, dup, _ := send(s, to, "x", "k0", "0", 0); !dup {
		t.Error("a delivered key was forgotten across the reopen")
	}
}

// Concurrent senders never overfill a mailbox: the count and the insert
// are one transaction.
func TestMailboxBoundUnderConcurrency(t *testing.T) {
	eachBackend(t, testMailboxBoundUnderConcurrency)
}

func testMailboxBoundUnderConcurrency(t *testing.T, bc backendCase) {
	s, _ := bc.open(t, newClock())
	to := spawn(t, s, "to").ID
	const capacity = 7
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, full := 0, 0
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := send(s, to, fmt.Sprint("s", i), fmt.Sprint("k", i), "1", capacity)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted++
			case errors.Is(err, ErrMailboxFull):
				full++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if accepted != capacity || full != 20-capacity {
		t.Fatalf("accepted %d, full %d; want %d, %d", accepted, full, capacity, 20-capacity)
	}
}

func msgKeys(ms []Message) string {
	s := ""
	for i, m := range ms {
		if i > 0 {
			s += ","
		}
		s += m.IdempotencyKey
	}
	return s
}

func ids(ms []Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}
