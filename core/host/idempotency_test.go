package host

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/idempotency"
	"github.com/wophost/wophost/sdk/wop"
)

// countingObserver counts what the state reports.
type countingObserver struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *countingObserver) add(k string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[k] += n
}

func (o *countingObserver) get(k string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[k]
}

func (o *countingObserver) snapshot() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for k, v := range o.n {
		out[k] = v
	}
	return out
}

func (o *countingObserver) StateWritable(ok bool)          { o.add(fmt.Sprintf("writable:%v", ok), 1) }
func (o *countingObserver) StateWriteFailed(store string)  { o.add("failed:"+store, 1) }
func (o *countingObserver) IdempotentReplay(typeID string) { o.add("replay:"+typeID, 1) }
func (o *countingObserver) Pruned(store string, n int)     { o.add("pruned:"+store, n) }

// keyedFixture is a host's state over a temporary state_dir and a node
// that counts its runs.
type keyedFixture struct {
	t    *testing.T
	s    *state
	obs  *countingObserver
	runs atomic.Int64
}

const testKey = "test-key-0123456789abcdef"

func newKeyedFixture(t *testing.T) *keyedFixture {
	t.Helper()
	cfg := config.Host{StateDir: t.TempDir(), MaxMessageBytes: 64 << 10, RunTimeout: time.Minute, Retention: config.DefaultRetention()}
	f := &keyedFixture{t: t, obs: &countingObserver{}}
	f.s = newStateFor(cfg, hclog.NewNullLogger(), func(string) bool { return false }, func() StateObserver { return f.obs })
	return f
}

// testClock is a clock that moves only when told to.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// clock gives the fixture's state, outcomes and storage checks alike, a
// clock that moves only when the test moves it.
func (f *keyedFixture) clock() *testClock {
	c := &testClock{t: time.Now()}
	f.s.now = c.now
	f.s.health.now = c.now
	return c
}

// run runs typeID with input under key through the idempotency rules; the
// node answers with outcome (its output, or its error) and counts itself.
func (f *keyedFixture) run(key, typeID, input string, outcome func(n int64) (*RunResult, error)) (*RunResult, error) {
	opts := RunOptions{IdempotencyKey: key}
	return f.s.runKeyed(context.Background(), typeID, json.RawMessage(input), opts, time.Minute, func() (*RunResult, error) {
		n := f.runs.Add(1)
		return outcome(n)
	})
}

func succeed(n int64) (*RunResult, error) {
	return &RunResult{RunID: fmt.Sprintf("run_%d", n), Output: json.RawMessage(fmt.Sprintf(`{"version":%d}`, n))}, nil
}

func fail(err *wop.Error) func(int64) (*RunResult, error) {
	return func(n int64) (*RunResult, error) { return &RunResult{RunID: fmt.Sprintf("run_%d", n)}, err }
}

// refuse is a node refused before it ran: no run result.
func refuse(err *wop.Error) func(int64) (*RunResult, error) {
	return func(int64) (*RunResult, error) { return nil, err }
}

func TestKeyedSameRequestRunsOnce(t *testing.T) {
	f := newKeyedFixture(t)
	first, err := f.run(testKey, "kvdemo.remember", `{"key":"k","value":"v"}`, succeed)
	if err != nil || first.Replayed || string(first.Output) != `{"version":1}` {
		t.Fatalf("first run = %+v, %v", first, err)
	}
	// The same request, its JSON spelled differently.
	again, err := f.run(testKey, "kvdemo.remember", ` { "value" : "v", "key" : "k" } `, succeed)
	if err != nil || !again.Replayed || again.RunID != first.RunID || string(again.Output) != `{"version":1}` {
		t.Fatalf("repeat = %+v, %v; want the recorded outcome of %s", again, err, first.RunID)
	}
	if n := f.runs.Load(); n != 1 {
		t.Fatalf("the node ran %d times, want 1", n)
	}
	if f.obs.get("replay:kvdemo.remember") != 1 {
		t.Fatalf("replays counted: %v", f.obs.snapshot())
	}
}

func TestKeyedDifferentRequestIsAMismatch(t *testing.T) {
	f := newKeyedFixture(t)
	if _, err := f.run(testKey, "kvdemo.remember", `{"key":"k","value":"v"}`, succeed); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string][2]string{
		"another input": {"kvdemo.remember", `{"key":"k","value":"w"}`},
		"another node":  {"kvdemo.forget", `{"key":"k","value":"v"}`},
	} {
		res, err := f.run(testKey, call[0], call[1], succeed)
		we := wop.AsError(err)
		if we == nil || we.Code != idempotency.CodeKeyMismatch || we.Retryable || res != nil {
			t.Errorf("%s: %+v, %v; want idempotency_key_mismatch", name, res, err)
		}
	}
	if n := f.runs.Load(); n != 1 {
		t.Fatalf("the node ran %d times, want 1", n)
	}
}

// Of concurrent requests under one key exactly one runs; the others are
// told it is in flight (retryable) while it runs, and get its outcome
// after.
func TestKeyedConcurrentRequestsRunOnce(t *testing.T) {
	f := newKeyedFixture(t)
	const n = 12
	started, finish := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var answered atomic.Int64
	errs := make([]error, n)
	results := make([]*RunResult, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer answered.Add(1)
			results[i], errs[i] = f.run(testKey, "a.b", `{}`, func(m int64) (*RunResult, error) {
				close(started)
				<-finish
				return succeed(m)
			})
		}()
	}
	<-started
	// Wait until every request but the running one has been answered.
	deadline := time.Now().Add(10 * time.Second)
	for answered.Load() < n-1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(finish)
	wg.Wait()
	ran, inFlight := 0, 0
	for i := range n {
		we := wop.AsError(errs[i])
		switch {
		case we == nil && results[i] != nil && !results[i].Replayed:
			ran++
		case we != nil && we.Code == idempotency.CodeInFlight && we.Retryable:
			inFlight++
		default:
			t.Errorf("request %d: %+v, %v", i, results[i], errs[i])
		}
	}
	if ran != 1 || inFlight != n-1 || f.runs.Load() != 1 {
		t.Fatalf("%d ran, %d in flight, node ran %d times; want 1, %d, 1", ran, inFlight, f.runs.Load(), n-1)
	}
	res, err := f.run(testKey, "a.b", `{}`, succeed)
	if err != nil || !res.Replayed {
		t.Fatalf("after the run: %+v, %v; want its outcome", res, err)
	}
}

// A run that failed retryably is not kept, nor is a refusal OpenWOP's
// HTTP rules do not keep (400, 5xx, retryable): the repeat runs again, and
// its final outcome is kept from then on.
func TestKeyedRetryableOutcomesAreNotKept(t *testing.T) {
	f := newKeyedFixture(t)
	for _, o := range []struct {
		name    string
		outcome func(int64) (*RunResult, error)
		code    string
	}{
		{"run failed, retryable", fail(wop.Errorf(wop.CodeUnavailable, "plugin restarting").WithRetryable(true)), wop.CodeUnavailable},
		{"run failed, retryable vendor code", fail(wop.Errorf("acme.store_unavailable", "disk").WithRetryable(true)), "acme.store_unavailable"},
		{"run failed, a hop's deadline", fail(wop.Errorf(wop.CodeDeadlineExceeded, "slow").WithRetryable(true)), wop.CodeDeadlineExceeded},
		{"refused: validation_error (400)", refuse(wop.Errorf(wop.CodeValidation, "bad input")), wop.CodeValidation},
		{"refused: internal (500)", refuse(wop.Errorf(wop.CodeInternal, "encode")), wop.CodeInternal},
		{"refused: pack restarting (503)", refuse(wop.Errorf(wop.CodeUnavailable, "pack p is restarting").WithRetryable(true)), wop.CodeUnavailable},
	} {
		if _, err := f.run(testKey, "a.b", `{}`, o.outcome); wop.CodeOf(err) != o.code {
			t.Fatalf("%s: answered %v", o.name, err)
		}
	}
	res, err := f.run(testKey, "a.b", `{}`, succeed)
	if err != nil || res.Replayed {
		t.Fatalf("after outcomes not kept: %+v, %v; want a run", res, err)
	}
	if n := f.runs.Load(); n != 7 {
		t.Fatalf("the node ran %d times, want 7 (6 outcomes not kept, then a success)", n)
	}
	if res, err := f.run(testKey, "a.b", `{}`, succeed); err != nil || !res.Replayed {
		t.Fatalf("after the success: %+v, %v; want it replayed", res, err)
	}
}

// A run that failed with an error that is not retryable is kept and
// answered again as the same outcome, whatever its code: the node ran,
// and running it again is the caller's decision, under a new key.
func TestKeyedFinalFailureIsKept(t *testing.T) {
	for _, e := range []*wop.Error{
		wop.Errorf("acme.key_not_found", "no value under key %q", "k"),
		wop.Errorf(wop.CodeInternal, "panic"),
		wop.Errorf(wop.CodeDeadlineExceeded, "node a.b did not finish before its deadline"),
		wop.Errorf(wop.CodeValidation, "the node refused its own input"),
	} {
		f := newKeyedFixture(t)
		if _, err := f.run(testKey, "a.b", `{}`, fail(e)); wop.CodeOf(err) != e.Code {
			t.Fatal(err)
		}
		res, err := f.run(testKey, "a.b", `{}`, succeed)
		if wop.CodeOf(err) != e.Code || res == nil || !res.Replayed || res.RunID != "run_1" {
			t.Fatalf("%s: repeat = %+v, %v; want the recorded outcome", e.Code, res, err)
		}
		if n := f.runs.Load(); n != 1 {
			t.Fatalf("%s: the node ran %d times, want 1", e.Code, n)
		}
	}
}

// A refusal OpenWOP keeps (a non-retryable 4xx other than 400, 401, 403,
// 429) is answered again as the same refusal, with no run id.
func TestKeyedFinalRefusalIsKept(t *testing.T) {
	f := newKeyedFixture(t)
	notFound := wop.Errorf(wop.CodeNotFound, "no loaded pack serves node %q", "a.b")
	if _, err := f.run(testKey, "a.b", `{}`, refuse(notFound)); wop.CodeOf(err) != notFound.Code {
		t.Fatal(err)
	}
	res, err := f.run(testKey, "a.b", `{}`, succeed)
	if wop.CodeOf(err) != notFound.Code || res == nil || !res.Replayed || res.RunID != "" {
		t.Fatalf("repeat = %+v, %v; want the recorded refusal", res, err)
	}
}

// Past the retention a key is free again: the same request runs, and a
// different one is no mismatch.
func TestKeyedExpiredKeyRunsAgain(t *testing.T) {
	f := newKeyedFixture(t)
	clock := f.clock()
	retention := f.s.retention.IdempotencyKeys
	if _, err := f.run(testKey, "a.b", `{"n":1}`, succeed); err != nil {
		t.Fatal(err)
	}
	clock.advance(retention - time.Nanosecond)
	if res, _ := f.run(testKey, "a.b", `{"n":1}`, succeed); res == nil || !res.Replayed {
		t.Fatal("not replayed within the retention")
	}
	clock.advance(time.Nanosecond)
	res, err := f.run(testKey, "a.b", `{"n":2}`, succeed)
	if err != nil || res.Replayed || f.runs.Load() != 2 {
		t.Fatalf("after expiry: %+v, %v, %d runs; want a second run", res, err, f.runs.Load())
	}
}

func TestKeyedGrammarAndScopes(t *testing.T) {
	f := newKeyedFixture(t)
	for _, key := range []string{"short", "has space in it 0123456789", "slash/0123456789abcdefghij"} {
		if _, err := f.run(key, "a.b", `{}`, succeed); wop.CodeOf(err) != idempotency.CodeKeyInvalid {
			t.Errorf("key %q: %v, want idempotency_key_invalid", key, err)
		}
	}
	if f.runs.Load() != 0 {
		t.Fatal("a node ran under an invalid key")
	}
	// The same key in two scopes (two credentials) is two keys.
	for _, scope := range []string{"", idempotency.Scope("token-a")} {
		opts := RunOptions{IdempotencyKey: testKey, IdempotencyScope: scope}
		res, err := f.s.runKeyed(context.Background(), "a.b", json.RawMessage(`{}`), opts, time.Minute, func() (*RunResult, error) {
			return succeed(f.runs.Add(1))
		})
		if err != nil || res.Replayed {
			t.Fatalf("scope %q: %+v, %v; want a run of its own", scope, res, err)
		}
	}
	// A replay is another request than the execute the key was used
	// for: a mismatch, and nothing runs.
	opts := RunOptions{IdempotencyKey: testKey, Replay: &RunRecord{RunID: "run_1"}}
	if _, err := f.s.runKeyed(context.Background(), "a.b", json.RawMessage(`{}`), opts, time.Minute, nil); wop.CodeOf(err) != idempotency.CodeKeyMismatch {
		t.Fatalf("replay with the key of an execute: %v", err)
	}
}

// An outcome whose record cannot be written still answers the run, is
// answered again from memory to a repeat (no second run), refuses new
// keyed runs before they run, and is written once the store takes
// writes again.
func TestKeyedUnsavedOutcomeIsAnsweredAndWrittenLater(t *testing.T) {
	f := newKeyedFixture(t)
	clock := f.clock()
	storeDir := filepath.Join(f.s.dir, IdempotencyDir)
	away := storeDir + ".away"
	res, err := f.run(testKey, "a.b", `{}`, func(n int64) (*RunResult, error) {
		// The store's directory goes away while the node runs: every
		// write to it fails from now on.
		if err := os.Rename(storeDir, away); err != nil {
			t.Fatal(err)
		}
		return succeed(n)
	})
	if err != nil || string(res.Output) != `{"version":1}` {
		t.Fatalf("the run's own answer: %+v, %v; want its output", res, err)
	}
	if f.obs.get("failed:"+StoreIdempotencyKeys) == 0 || f.obs.get("writable:false") != 1 {
		t.Fatalf("the failed write was not reported: %v", f.obs.snapshot())
	}
	again, err := f.run(testKey, "a.b", `{}`, succeed)
	if err != nil || !again.Replayed || again.RunID != res.RunID {
		t.Fatalf("repeat while unsaved: %+v, %v; want the outcome from memory", again, err)
	}
	other, err := f.run("another-key-0123456789abc", "a.b", `{}`, succeed)
	if we := wop.AsError(err); we == nil || we.Code != wop.CodeUnavailable || !we.Retryable || other != nil {
		t.Fatalf("a new key while writes fail: %+v, %v; want a retryable refusal", other, err)
	}
	if n := f.runs.Load(); n != 1 {
		t.Fatalf("the node ran %d times, want 1", n)
	}

	if err := os.Rename(away, storeDir); err != nil {
		t.Fatal(err)
	}
	// The failure is remembered for one check's life, then a probe finds
	// the directory writable again.
	if left := f.s.flush(context.Background()); left != 1 {
		t.Fatalf("%d outcomes unsaved while the failure is remembered, want 1", left)
	}
	clock.advance(storageCheckTTL)
	if left := f.s.flush(context.Background()); left != 0 {
		t.Fatalf("%d outcomes still unsaved", left)
	}
	rec, err := f.s.store.Get(context.Background(), idempotency.ID("", testKey))
	if err != nil || rec.State != idempotency.StateDone || rec.RunID != res.RunID {
		t.Fatalf("record after flush: %+v, %v", rec, err)
	}
	if f.s.unsavedRecord(rec.ID) != nil {
		t.Fatal("the written outcome is still held in memory")
	}
}

// Past max_idempotency_keys a new key is refused (retryable) while the
// keys held keep answering.
func TestKeyedMaxKeys(t *testing.T) {
	f := newKeyedFixture(t)
	f.s.retention.MaxIdempotencyKeys = 1
	f.s.setKeys(0)
	if _, err := f.run(testKey, "a.b", `{}`, succeed); err != nil {
		t.Fatal(err)
	}
	_, err := f.run("another-key-0123456789abc", "a.b", `{}`, succeed)
	if we := wop.AsError(err); we == nil || we.Code != wop.CodeUnavailable || !we.Retryable {
		t.Fatalf("a key past the maximum: %v", err)
	}
	if res, err := f.run(testKey, "a.b", `{}`, succeed); err != nil || !res.Replayed {
		t.Fatalf("a held key: %+v, %v", res, err)
	}
}
