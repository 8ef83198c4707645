package api

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/idempotency"
)

// A run belongs to the token that asked for it: the execute names it as
// the run's owner, and only that token, or one with the runs:all scope,
// may replay it. Every other token, the one that shares all but its last
// byte included, gets the answer of a run that does not exist, and
// nothing runs.
func TestRunsAreVisibleToTheirOwner(t *testing.T) {
	f := newFake()
	f.res = &host.RunResult{RunID: "run_1", Output: json.RawMessage(`{}`)}
	s := New(NewCurrent(f), Options{
		Tokens:      []string{"tok-alice", "tok-bob", "tok-alicf", "tok-ops", "tok-odd"},
		TokenScopes: map[string][]string{"tok-ops": {config.ScopeAllRuns}, "tok-odd": {}},
	})
	w := execute(t, s, `{"input":{}}`, map[string]string{"Authorization": "Bearer tok-alice"})
	if w.Code != http.StatusOK || f.opts.IdempotencyScope != idempotency.Scope("tok-alice") {
		t.Fatalf("execute: %d, owner %q", w.Code, f.opts.IdempotencyScope)
	}
	alices := &host.RunRecord{RunID: replayRunID, TypeID: "kvdemo.remember", Input: json.RawMessage(`{}`), Owner: f.opts.IdempotencyScope}
	cli := &host.RunRecord{RunID: "run_0123456789abcdef0123cafe", TypeID: "kvdemo.remember", Input: json.RawMessage(`{}`)}
	f.records = map[string]*host.RunRecord{alices.RunID: alices, cli.RunID: cli}
	f.calls = 0

	for _, c := range []struct {
		token string
		run   *host.RunRecord
		want  int
	}{
		{"tok-alice", alices, http.StatusOK},
		{"tok-ops", alices, http.StatusOK},
		{"tok-bob", alices, http.StatusNotFound},
		{"tok-alicf", alices, http.StatusNotFound},
		{"tok-odd", alices, http.StatusNotFound},
		// A run made without a credential belongs to no token.
		{"tok-alice", cli, http.StatusNotFound},
		{"tok-ops", cli, http.StatusOK},
	} {
		before := f.calls
		req := httptest.NewRequest("POST", "/v1/runs/"+c.run.RunID+":replay", nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		rw := httptest.NewRecorder()
		s.ServeHTTP(rw, req)
		ran := f.calls - before
		if rw.Code != c.want {
			t.Errorf("%s replays %s: %d %s, want %d", c.token, c.run.RunID, rw.Code, rw.Body, c.want)
		}
		if want := map[bool]int{true: 1, false: 0}[c.want == http.StatusOK]; ran != want {
			t.Errorf("%s replays %s: %d runs, want %d", c.token, c.run.RunID, ran, want)
		}
		if c.want == http.StatusNotFound {
			unknown := httptest.NewRequest("POST", "/v1/runs/run_0123456789abcdef0123dead:replay", nil)
			unknown.Header.Set("Authorization", "Bearer "+c.token)
			uw := httptest.NewRecorder()
			f.recordErr = fs.ErrNotExist
			s.ServeHTTP(uw, unknown)
			if uw.Code != rw.Code || strings.Replace(uw.Body.String(), "run_0123456789abcdef0123dead", c.run.RunID, 1) != rw.Body.String() {
				t.Errorf("a run of another token answers %d %s; an unknown run %d %s", rw.Code, rw.Body, uw.Code, uw.Body)
			}
		}
	}
	if f.opts.IdempotencyScope != idempotency.Scope("tok-ops") {
		t.Errorf("the replay's own record belongs to %q, want the replaying token's scope", f.opts.IdempotencyScope)
	}

	// Without tokens every run is everyone's, as on a loopback host
	// without authentication.
	open := New(NewCurrent(f), Options{})
	if w := replayRequestTo(open, "/v1/runs/"+alices.RunID+":replay", ""); w.Code != http.StatusOK {
		t.Errorf("no tokens: %d %s", w.Code, w.Body)
	}
}
