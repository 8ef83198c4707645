package api

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/idempotency"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/wop"
)

// fakeBackend answers every run with res and err and remembers what it
// was asked.
type fakeBackend struct {
	reg      *registry.Registry
	res      *host.RunResult
	err      error
	ready    error
	mu       sync.Mutex
	calls    int
	opts     host.RunOptions
	ctxDone  bool // whether the run's context could be cancelled
	gotInput string
	// unknown lists typeIds no pack serves.
	unknown map[string]bool
	// records are the run records RunRecord finds; recordErr answers
	// every other id.
	records   map[string]*host.RunRecord
	recordErr error
	// page and listErr answer ListRuns; filter is what it was asked.
	page    *host.RunPage
	listErr error
	filter  host.RunFilter
	lists   int
}

func newFake() *fakeBackend {
	return &fakeBackend{reg: registry.New(registry.Implementation{Name: "test"})}
}

func (f *fakeBackend) Registry() *registry.Registry { return f.reg }
func (f *fakeBackend) Packs() []host.PackInfo       { return nil }
func (f *fakeBackend) ServesNode(id string) bool    { return !f.unknown[id] }
func (f *fakeBackend) Ready() error                 { return f.ready }
func (f *fakeBackend) RunRecord(_ context.Context, id string) (*host.RunRecord, error) {
	if r, ok := f.records[id]; ok {
		return r, nil
	}
	return nil, f.recordErr
}
func (f *fakeBackend) ListRuns(_ context.Context, filter host.RunFilter) (*host.RunPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	f.filter = filter
	return f.page, f.listErr
}
func (f *fakeBackend) Run(ctx context.Context, _ string, input json.RawMessage, opts host.RunOptions) (*host.RunResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.opts = opts
	f.ctxDone = ctx.Done() != nil
	f.gotInput = string(input)
	return f.res, f.err
}

const key22 = "key-0123456789abcdefghij"

func execute(t *testing.T, s *Server, body string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	// A server's request context ends when the client goes away.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, "POST", "/v1/nodes/kvdemo.remember:execute", strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	return w
}

func TestExecuteIdempotencyKeySources(t *testing.T) {
	f := newFake()
	f.res = &host.RunResult{RunID: "run_1", Output: json.RawMessage(`{}`)}
	s := New(NewCurrent(f), Options{})
	for _, tc := range []struct {
		name, body, header, want string
	}{
		{"header", `{"input":{}}`, key22, key22},
		{"body", `{"input":{},"idempotencyKey":"` + key22 + `"}`, "", key22},
		{"both, equal", `{"input":{},"idempotencyKey":"` + key22 + `"}`, key22, key22},
		{"none", `{"input":{}}`, "", ""},
	} {
		h := map[string]string{}
		if tc.header != "" {
			h[HeaderIdempotencyKey] = tc.header
		}
		w := execute(t, s, tc.body, h)
		if w.Code != 200 || f.opts.IdempotencyKey != tc.want || !f.opts.Record {
			t.Errorf("%s: %d %s, key %q; want 200 and key %q", tc.name, w.Code, w.Body, f.opts.IdempotencyKey, tc.want)
		}
		// A keyed run is not cut short when the client goes away.
		if want := tc.want == ""; f.ctxDone != want {
			t.Errorf("%s: cancellable run context = %v, want %v", tc.name, f.ctxDone, want)
		}
	}
}

func TestExecuteIdempotencyKeyConflicts(t *testing.T) {
	f := newFake()
	f.res = &host.RunResult{RunID: "run_1", Output: json.RawMessage(`{}`)}
	s := New(NewCurrent(f), Options{})
	calls := f.calls
	w := execute(t, s, `{"input":{},"idempotencyKey":"`+key22+`"}`, map[string]string{HeaderIdempotencyKey: "other-key-0123456789abcdef"})
	if e := envelope(t, w); w.Code != 400 || e.Error != idempotency.CodeKeyInvalid || !strings.Contains(e.Message, "differ") {
		t.Fatalf("header and body differ: %d %+v", w.Code, e)
	}
	req := httptest.NewRequest("POST", "/v1/nodes/kvdemo.remember:execute", strings.NewReader(`{"input":{}}`))
	req.Header.Add(HeaderIdempotencyKey, key22)
	req.Header.Add(HeaderIdempotencyKey, key22)
	w = httptest.NewRecorder()
	s.ServeHTTP(w, req)
	if e := envelope(t, w); w.Code != 400 || e.Error != idempotency.CodeKeyInvalid {
		t.Fatalf("two headers: %d %+v", w.Code, e)
	}
	req = httptest.NewRequest("POST", "/v1/nodes/kvdemo.remember:execute", strings.NewReader(`{"input":{}}`))
	req.Header[HeaderIdempotencyKey] = []string{""}
	w = httptest.NewRecorder()
	s.ServeHTTP(w, req)
	if e := envelope(t, w); w.Code != 400 || e.Error != idempotency.CodeKeyInvalid {
		t.Fatalf("empty header: %d %+v", w.Code, e)
	}
	if f.calls != calls {
		t.Fatal("a request with conflicting keys reached the host")
	}
}

// The key's scope comes from the credential, never the body: two tokens
// are two scopes, and no token is none.
func TestExecuteIdempotencyScope(t *testing.T) {
	f := newFake()
	f.res = &host.RunResult{RunID: "run_1", Output: json.RawMessage(`{}`)}
	s := New(NewCurrent(f), Options{Tokens: []string{"tok-a", "tok-b"}})
	scopes := map[string]string{}
	for _, tok := range []string{"tok-a", "tok-b"} {
		w := execute(t, s, `{"input":{}}`, map[string]string{"Authorization": "Bearer " + tok, HeaderIdempotencyKey: key22})
		if w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		scopes[tok] = f.opts.IdempotencyScope
	}
	if scopes["tok-a"] == scopes["tok-b"] || scopes["tok-a"] != idempotency.Scope("tok-a") || strings.Contains(scopes["tok-a"], "tok") {
		t.Fatalf("scopes %v", scopes)
	}
	open := New(NewCurrent(f), Options{})
	if w := execute(t, open, `{"input":{}}`, map[string]string{HeaderIdempotencyKey: key22}); w.Code != 200 || f.opts.IdempotencyScope != "" {
		t.Fatalf("no tokens: %d scope %q", w.Code, f.opts.IdempotencyScope)
	}
}

// A replay repeats the first answer byte for byte; only the header says
// it is one.
func TestExecuteMarksReplays(t *testing.T) {
	f := newFake()
	s := New(NewCurrent(f), Options{})

	f.res = &host.RunResult{RunID: "run_1", Output: json.RawMessage(`{"version":1}`)}
	first := execute(t, s, `{"input":{}}`, map[string]string{HeaderIdempotencyKey: key22})
	if first.Header().Get(HeaderIdempotentReplay) != "" {
		t.Fatalf("a first run marked as a replay: %v %s", first.Header(), first.Body)
	}
	f.res = &host.RunResult{RunID: "run_1", Output: json.RawMessage(`{"version":1}`), Replayed: true}
	w := execute(t, s, `{"input":{}}`, map[string]string{HeaderIdempotencyKey: key22})
	if w.Code != 200 || w.Body.String() != first.Body.String() || w.Body.String() != `{"runId":"run_1","status":"succeeded","output":{"version":1}}`+"\n" {
		t.Fatalf("replayed success: %d %s, first %s", w.Code, w.Body, first.Body)
	}
	if got := w.Header()[HeaderIdempotentReplay]; len(got) != 1 || got[0] != "true" {
		t.Fatalf("replay header = %v (headers %v)", got, w.Header())
	}

	// A failed run is an outcome, replayed as it was first answered.
	f.res, f.err = &host.RunResult{RunID: "run_2"}, wop.Errorf("acme.key_not_found", "gone")
	first = execute(t, s, `{"input":{}}`, map[string]string{HeaderIdempotencyKey: key22})
	f.res.Replayed = true
	w = execute(t, s, `{"input":{}}`, map[string]string{HeaderIdempotencyKey: key22})
	if w.Code != 200 || w.Body.String() != first.Body.String() || w.Header()[HeaderIdempotentReplay] == nil ||
		w.Body.String() != `{"runId":"run_2","status":"failed","error":{"code":"acme.key_not_found","message":"gone","retryable":false}}`+"\n" {
		t.Fatalf("replayed failure: %d %v %s", w.Code, w.Header(), w.Body)
	}

	// A kept refusal (no run id) is replayed as the refusal it was.
	f.res, f.err = &host.RunResult{Replayed: true}, wop.Errorf(wop.CodeNotFound, "no loaded pack serves node")
	w = execute(t, s, `{"input":{}}`, map[string]string{HeaderIdempotencyKey: key22})
	if e := envelope(t, w); w.Code != 404 || e.Error != "not_found" || w.Header()[HeaderIdempotentReplay] == nil {
		t.Fatalf("replayed refusal: %d %v %s", w.Code, w.Header(), w.Body)
	}
}

func TestExecuteIdempotencyStatuses(t *testing.T) {
	f := newFake()
	s := New(NewCurrent(f), Options{})
	for _, tc := range []struct {
		err        *wop.Error
		status     int
		code       string
		retryAfter bool
	}{
		{wop.Errorf(idempotency.CodeKeyMismatch, "x"), 409, "idempotency_key_mismatch", false},
		{wop.Errorf(idempotency.CodeInFlight, "x").WithRetryable(true), 409, "idempotency_in_flight", true},
		{wop.Errorf(idempotency.CodeKeyInvalid, "x"), 400, "idempotency_key_invalid", false},
		{wop.Errorf(wop.CodeUnavailable, "the outcome of this idempotency key cannot be read").WithRetryable(true), 503, "runner_unavailable", true},
		{wop.Errorf(wop.CodeUnavailable, "state directory full").WithRetryable(true).WithDetails(map[string]string{"storage": "state_dir"}), 503, "wophost.storage_unavailable", true},
		{wop.Errorf(wop.CodeInternal, "x"), 500, "internal_error", false},
	} {
		f.res, f.err = nil, tc.err
		w := execute(t, s, `{"input":{}}`, map[string]string{HeaderIdempotencyKey: key22})
		if e := envelope(t, w); w.Code != tc.status || e.Error != tc.code || (w.Header().Get("Retry-After") != "") != tc.retryAfter {
			t.Errorf("%s: %d %s Retry-After %q; want %d %s, Retry-After %v", tc.err.Code, w.Code, e.Error, w.Header().Get("Retry-After"), tc.status, tc.code, tc.retryAfter)
		}
	}
}

func TestReadyzReportsStorage(t *testing.T) {
	f := newFake()
	f.ready = &host.StorageError{Dir: "/var/lib/wophost", Reason: "12 KiB free, below the 32.3 MiB one run may need"}
	s := New(NewCurrent(f), Options{})
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
	if e := envelope(t, w); w.Code != http.StatusServiceUnavailable || e.Error != "runner_unavailable" || e.Details["status"] != "not ready" ||
		!strings.Contains(e.Message, "state directory cannot take writes: 12 KiB free") || w.Header().Get("Retry-After") == "" {
		t.Fatalf("readyz: %d %s", w.Code, w.Body)
	}
	f.ready = nil
	w = httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
	if w.Code != 200 {
		t.Fatalf("readyz after recovery: %d %s", w.Code, w.Body)
	}
}

// timeoutMs reaches the host as the duration it names, and one too large
// for a duration as the largest, never wrapped around to a short or
// negative one (the host then holds it to run_timeout).
func TestExecuteTimeoutMsNeverOverflows(t *testing.T) {
	f := newFake()
	f.res = &host.RunResult{RunID: "run_1", Output: json.RawMessage(`{}`)}
	s := New(NewCurrent(f), Options{})
	const maxMs = math.MaxInt64 / int64(time.Millisecond)
	for _, tc := range []struct {
		ms   string
		want time.Duration
	}{
		{"0", 0},
		{"1000", time.Second},
		{"600000", 10 * time.Minute},
		{"600001", 10*time.Minute + time.Millisecond},
		{"31536000000000", math.MaxInt64}, // a thousand years
		{strconv.FormatInt(maxMs, 10), time.Duration(maxMs) * time.Millisecond},
		{strconv.FormatInt(maxMs+1, 10), math.MaxInt64},
		{"9223372036854775807", math.MaxInt64},
	} {
		w := execute(t, s, `{"input":{},"timeoutMs":`+tc.ms+`}`, nil)
		if w.Code != 200 || f.opts.Timeout != tc.want {
			t.Errorf("timeoutMs %s: %d %s, timeout %v; want 200 and %v", tc.ms, w.Code, w.Body, f.opts.Timeout, tc.want)
		}
	}
	// Past an int64 the body is refused as the field's, not accepted.
	if w := execute(t, s, `{"input":{},"timeoutMs":9223372036854775808}`, nil); w.Code != 400 || !strings.Contains(w.Body.String(), "timeoutMs") {
		t.Errorf("timeoutMs 2^63: %d %s, want 400 naming the field", w.Code, w.Body)
	}
}
