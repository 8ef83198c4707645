package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/idempotency"
	"github.com/wophost/wophost/sdk/wop"
)

// The host is a Backend, listing included.
var _ Backend = (*host.Host)(nil)

func get(s *Server, method, path, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	return w
}

// GET /v1/runs hands the host every parameter as the filter's field and
// answers its page as {"runs", "next"}.
func TestListRunsQuery(t *testing.T) {
	f := newFake()
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.page = &host.RunPage{Runs: []host.RunSummary{{RunID: "run_0a", TypeID: "kvdemo.remember", Outcome: host.OutcomeFailed,
		ErrorCode: "acme.boom", StartedAt: started, Calls: 3}}, Next: "cursor-2"}
	s := New(NewCurrent(f), Options{})
	w := get(s, "GET", "/v1/runs?typeId=kvdemo.remember&status=failed&errorCode=acme.boom&idempotencyKey=key-1"+
		"&since=2026-01-02T00:00:00Z&until=2026-01-03T00:00:00.5%2B01:00&limit=2&after=cursor-1", "")
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	want := host.RunFilter{TypeID: "kvdemo.remember", Outcome: host.OutcomeFailed, ErrorCode: "acme.boom", IdempotencyKey: "key-1",
		Since: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), Until: time.Date(2026, 1, 2, 23, 0, 0, 5e8, time.UTC),
		AllOwners: true, Limit: 2, After: "cursor-1"}
	got := f.filter
	if !got.Since.Equal(want.Since) || !got.Until.Equal(want.Until) {
		t.Errorf("window [%v, %v), want [%v, %v)", got.Since, got.Until, want.Since, want.Until)
	}
	got.Since, got.Until, want.Since, want.Until = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if got != want {
		t.Errorf("filter %+v\nwant %+v", got, want)
	}
	var body struct {
		Runs []map[string]any `json:"runs"`
		Next string           `json:"next"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || len(body.Runs) != 1 || body.Next != "cursor-2" {
		t.Fatalf("answer %s (%v)", w.Body, err)
	}
	if r := body.Runs[0]; r["runId"] != "run_0a" || r["outcome"] != "failed" || r["errorCode"] != "acme.boom" ||
		r["startedAt"] != "2026-01-02T03:04:05Z" || r["calls"] != 3.0 {
		t.Errorf("run %v", r)
	}

	// No parameters: every field empty.
	if w := get(s, "GET", "/v1/runs", ""); w.Code != http.StatusOK || f.filter != (host.RunFilter{AllOwners: true}) {
		t.Errorf("no parameters: %d, filter %+v", w.Code, f.filter)
	}
}

// A bad parameter is 400 validation naming it, an unknown one too, and
// the host is not asked; the host's own refusal (a cursor it did not
// make) is answered as it is.
func TestListRunsRefusals(t *testing.T) {
	f := newFake()
	f.page = &host.RunPage{Runs: []host.RunSummary{}}
	s := New(NewCurrent(f), Options{})
	for _, c := range []struct{ query, field string }{
		{"status=succeed", "status"},
		{"status=unreadable", "status"},
		{"since=2026-01-02", "since"},
		{"until=yesterday", "until"},
		{"limit=two", "limit"},
		{"limit=0", "limit"},
		{"limit=99999999999999999999", "limit"},
		{"typeid=kvdemo.remember", "typeid"},
		{"typeId=a&typeId=b", "typeId"},
		{"outcome=failed", "outcome"},
		{"typeId=a&zeta=1&alpha=2", "alpha"},
	} {
		before := f.lists
		w := get(s, "GET", "/v1/runs?"+c.query, "")
		e := envelope(t, w)
		if w.Code != http.StatusBadRequest || e.Error != "validation_error" || e.Details["field"] != c.field || !strings.Contains(e.Message, `"`+c.field+`"`) {
			t.Errorf("%s: %d %s; want 400 naming %q", c.query, w.Code, w.Body, c.field)
		}
		if f.lists != before {
			t.Errorf("%s: the host was asked", c.query)
		}
	}
	if w := get(s, "GET", "/v1/runs?a=1&b=1&c=1&d=1&e=1&f=1&g=1", ""); !strings.Contains(w.Body.String(), "and 2 more") {
		t.Errorf("many unknown parameters: %s", w.Body)
	}
	if w := get(s, "GET", "/v1/runs?limit=%zz", ""); w.Code != http.StatusBadRequest {
		t.Errorf("a query that cannot be read: %d %s", w.Code, w.Body)
	}

	f.listErr = wop.Errorf(wop.CodeValidation, `field "after": not a cursor`).WithDetails(map[string]string{"field": "after"})
	if w := get(s, "GET", "/v1/runs?after=x", ""); w.Code != http.StatusBadRequest || envelope(t, w).Details["field"] != "after" {
		t.Errorf("the host's refusal: %d %s", w.Code, w.Body)
	}
	f.listErr = fmt.Errorf("list: %w", &host.StorageError{Backend: config.BackendPostgres, Reason: "it cannot be reached"})
	if w := get(s, "GET", "/v1/runs", ""); w.Code != http.StatusServiceUnavailable || envelope(t, w).Details["retryable"] != true {
		t.Errorf("storage out of reach: %d %s", w.Code, w.Body)
	}
	f.listErr = errors.New("open /var/lib/secret-state/runs: input/output error")
	if w := get(s, "GET", "/v1/runs", ""); w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "secret-state") {
		t.Errorf("a storage failure: %d %s", w.Code, w.Body)
	}
}

// A token lists its own runs, one with runs:all and an API without
// tokens every run; without a valid token nothing is listed.
func TestListRunsVisibility(t *testing.T) {
	f := newFake()
	f.page = &host.RunPage{Runs: []host.RunSummary{}}
	s := New(NewCurrent(f), Options{
		Tokens:      []string{"tok-alice", "tok-ops", "tok-odd"},
		TokenScopes: map[string][]string{"tok-ops": {config.ScopeAllRuns}, "tok-odd": {"runs:al"}},
	})
	for _, c := range []struct {
		token string
		want  host.RunFilter
	}{
		{"tok-alice", host.RunFilter{Owner: idempotency.Scope("tok-alice")}},
		{"tok-odd", host.RunFilter{Owner: idempotency.Scope("tok-odd")}},
		{"tok-ops", host.RunFilter{AllOwners: true}},
	} {
		if w := get(s, "GET", "/v1/runs", c.token); w.Code != http.StatusOK || f.filter != c.want {
			t.Errorf("%s: %d, filter %+v; want %+v", c.token, w.Code, f.filter, c.want)
		}
	}
	before := f.lists
	for _, token := range []string{"", "tok-alicf"} {
		if w := get(s, "GET", "/v1/runs", token); w.Code != http.StatusUnauthorized {
			t.Errorf("token %q: %d", token, w.Code)
		}
	}
	if f.lists != before {
		t.Error("an unauthenticated request was listed")
	}
}

// GET /v1/runs/{runId} answers the record to the token that made the
// run and one with runs:all; every other token gets the answer of a run
// that does not exist.
func TestGetRunRecord(t *testing.T) {
	f := newFake()
	alices := &host.RunRecord{RunID: replayRunID, TypeID: "kvdemo.remember", Input: json.RawMessage(`{"key":"a"}`),
		Outcome: host.OutcomeSucceeded, Output: json.RawMessage(`{"version":1}`), Owner: idempotency.Scope("tok-alice"), IdempotencyKey: "key-1"}
	cli := &host.RunRecord{RunID: "run_0123456789abcdef0123cafe", TypeID: "kvdemo.remember", Input: json.RawMessage(`{}`)}
	f.records = map[string]*host.RunRecord{alices.RunID: alices, cli.RunID: cli}
	f.recordErr = fs.ErrNotExist
	s := New(NewCurrent(f), Options{
		Tokens:      []string{"tok-alice", "tok-bob", "tok-alicf", "tok-ops"},
		TokenScopes: map[string][]string{"tok-ops": {config.ScopeAllRuns}},
	})
	for _, c := range []struct {
		token string
		run   *host.RunRecord
		want  int
	}{
		{"tok-alice", alices, http.StatusOK},
		{"tok-ops", alices, http.StatusOK},
		{"tok-bob", alices, http.StatusNotFound},
		{"tok-alicf", alices, http.StatusNotFound},
		{"tok-alice", cli, http.StatusNotFound},
		{"tok-ops", cli, http.StatusOK},
	} {
		w := get(s, "GET", "/v1/runs/"+c.run.RunID, c.token)
		if w.Code != c.want {
			t.Errorf("%s reads %s: %d %s, want %d", c.token, c.run.RunID, w.Code, w.Body, c.want)
			continue
		}
		if c.want == http.StatusOK {
			var got host.RunRecord
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.RunID != c.run.RunID || got.Owner != c.run.Owner ||
				got.IdempotencyKey != c.run.IdempotencyKey || string(got.Input) != string(c.run.Input) {
				t.Errorf("%s reads %s: %s (%v)", c.token, c.run.RunID, w.Body, err)
			}
			continue
		}
		unknown := get(s, "GET", "/v1/runs/run_0123456789abcdef0123dead", c.token)
		if unknown.Code != w.Code || strings.Replace(unknown.Body.String(), "run_0123456789abcdef0123dead", c.run.RunID, 1) != w.Body.String() {
			t.Errorf("a run of another token answers %d %s; an unknown run %d %s", w.Code, w.Body, unknown.Code, unknown.Body)
		}
	}
	if w := get(s, "GET", "/v1/runs/"+alices.RunID, ""); w.Code != http.StatusUnauthorized {
		t.Errorf("no token: %d", w.Code)
	}
	if w := get(New(NewCurrent(f), Options{}), "GET", "/v1/runs/"+alices.RunID, ""); w.Code != http.StatusOK {
		t.Errorf("no tokens configured: %d %s", w.Code, w.Body)
	}

	open := New(NewCurrent(f), Options{})
	f.recordErr = fmt.Errorf("read: %w", wop.Errorf(host.CodeRunExpired, "pruned"))
	if w := get(open, "GET", "/v1/runs/run_0123456789abcdef0123dead", ""); w.Code != http.StatusGone || envelope(t, w).Error != host.CodeRunExpired {
		t.Errorf("a pruned run: %d %s", w.Code, w.Body)
	}
	f.recordErr = errors.New("open /var/lib/secret-state/runs/x.json: input/output error")
	if w := get(open, "GET", "/v1/runs/run_0123456789abcdef0123dead", ""); w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "secret-state") {
		t.Errorf("a storage failure: %d %s", w.Code, w.Body)
	}
	long := "run_" + strings.Repeat("f", host.MaxRunIDHexDigits+1)
	if w := get(open, "GET", "/v1/runs/"+long, ""); w.Code != http.StatusNotFound || strings.Contains(w.Body.String(), "ffff") {
		t.Errorf("an id past the bound: %d %s", w.Code, w.Body)
	}
}

// A run's path is read with GET and HEAD, its :replay path posted to,
// the listing read: every other method is 405 with the Allow of its own
// path, and nothing is read or run.
func TestRunRoutesMethods(t *testing.T) {
	f := newFake()
	rec := &host.RunRecord{RunID: replayRunID, TypeID: "kvdemo.remember", Input: json.RawMessage(`{}`)}
	f.records = map[string]*host.RunRecord{replayRunID: rec}
	f.page = &host.RunPage{Runs: []host.RunSummary{}}
	s := New(NewCurrent(f), Options{})
	for _, c := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/v1/runs/" + replayRunID, http.StatusOK, ""},
		{"HEAD", "/v1/runs/" + replayRunID, http.StatusOK, ""},
		{"GET", "/v1/runs", http.StatusOK, ""},
		{"GET", "/v1/runs/" + replayRunID + ":replay", http.StatusMethodNotAllowed, "POST"},
		{"HEAD", "/v1/runs/" + replayRunID + ":replay", http.StatusMethodNotAllowed, "POST"},
		{"DELETE", "/v1/runs/" + replayRunID + ":replay", http.StatusMethodNotAllowed, "POST"},
		{"POST", "/v1/runs/" + replayRunID, http.StatusMethodNotAllowed, "GET, HEAD"},
		{"DELETE", "/v1/runs/" + replayRunID, http.StatusMethodNotAllowed, "GET, HEAD"},
		{"POST", "/v1/runs", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"PUT", "/v1/runs", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"PUT", "/v1/plugins", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"GET", "/v1/nodes/kvdemo.remember:execute", http.StatusMethodNotAllowed, "POST"},
	} {
		f.calls = 0
		w := get(s, c.method, c.path, "")
		if w.Code != c.status || w.Header().Get("Allow") != c.allow {
			t.Errorf("%s %s: %d Allow %q %s; want %d Allow %q", c.method, c.path, w.Code, w.Header().Get("Allow"), w.Body, c.status, c.allow)
		}
		if w.Code == http.StatusMethodNotAllowed && c.method != "HEAD" {
			envelope(t, w)
		}
		if f.calls != 0 {
			t.Errorf("%s %s: the node ran", c.method, c.path)
		}
	}
}
