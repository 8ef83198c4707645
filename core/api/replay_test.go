package api

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/sdk/wop"
)

const replayRunID = "run_0123456789abcdef01234567"

func replayRequestTo(s *Server, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	return w
}

func TestReplayRunsTheRecordedNode(t *testing.T) {
	f := newFake()
	rec := &host.RunRecord{RunID: replayRunID, TypeID: "kvdemo.remember", Input: json.RawMessage(`{"key":"a"}`)}
	f.records = map[string]*host.RunRecord{replayRunID: rec}
	summary := &dispatch.ReplaySummary{Source: replayRunID, Served: 2, Live: 1}
	f.res = &host.RunResult{RunID: "run_new", Output: json.RawMessage(`{"ok":true}`), Replay: summary}
	s := New(NewCurrent(f), Options{MaxBodyBytes: 1 << 20})

	w := replayRequestTo(s, "/v1/runs/"+replayRunID+":replay", `{"live":["mcp.callTool"]}`)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var got struct {
		RunID  string                  `json:"runId"`
		Status string                  `json:"status"`
		Output json.RawMessage         `json:"output"`
		Replay *dispatch.ReplaySummary `json:"replay"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.RunID != "run_new" || got.Status != "succeeded" || string(got.Output) != `{"ok":true}` || got.Replay == nil || got.Replay.Served != 2 {
		t.Errorf("answer %s", w.Body)
	}
	if f.opts.Replay != rec || !f.opts.Record || len(f.opts.Live) != 1 || f.opts.Live[0] != "mcp.callTool" {
		t.Errorf("run options %+v", f.opts)
	}
	if f.gotInput != `{"key":"a"}` {
		t.Errorf("input %s, want the recorded one", f.gotInput)
	}

	// An empty body replays without live calls.
	w = replayRequestTo(s, "/v1/runs/"+replayRunID+":replay", "")
	if w.Code != http.StatusOK || len(f.opts.Live) != 0 {
		t.Errorf("empty body: status %d, live %v", w.Code, f.opts.Live)
	}
}

func TestReplayRefusals(t *testing.T) {
	f := newFake()
	s := New(NewCurrent(f), Options{MaxBodyBytes: 1 << 20})
	expired := fmt.Errorf("read: %w", wop.Errorf(host.CodeRunExpired, "pruned"))
	for _, tc := range []struct {
		name, path, body string
		recordErr        error
		status           int
		code             string
	}{
		{"not a run id", "/v1/runs/bogus:replay", "", nil, http.StatusNotFound, "not_found"},
		// A run's own path is read with GET, not posted to.
		{"no suffix", "/v1/runs/" + replayRunID, "", nil, http.StatusMethodNotAllowed, "wophost.method_not_allowed"},
		{"unknown run", "/v1/runs/" + replayRunID + ":replay", "", fs.ErrNotExist, http.StatusNotFound, "not_found"},
		{"expired run", "/v1/runs/" + replayRunID + ":replay", "", expired, http.StatusGone, host.CodeRunExpired},
		{"negative timeout", "/v1/runs/" + replayRunID + ":replay", `{"timeoutMs":-1}`, nil, http.StatusBadRequest, "validation_error"},
		{"unknown field", "/v1/runs/" + replayRunID + ":replay", `{"liev":[]}`, nil, http.StatusBadRequest, "validation_error"},
		{"member in another case", "/v1/runs/" + replayRunID + ":replay", `{"TimeoutMs":1000}`, nil, http.StatusBadRequest, "validation_error"},
		{"member twice", "/v1/runs/" + replayRunID + ":replay", `{"timeoutMs":-1,"timeoutMs":1000}`, nil, http.StatusBadRequest, "validation_error"},
		{"invalid UTF-8", "/v1/runs/" + replayRunID + ":replay", "{\"live\":[\"\xff\"]}", nil, http.StatusBadRequest, "validation_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.recordErr = tc.recordErr
			f.calls = 0
			w := replayRequestTo(s, tc.path, tc.body)
			var env struct {
				Error string `json:"error"`
			}
			_ = json.Unmarshal(w.Body.Bytes(), &env)
			if w.Code != tc.status || env.Error != tc.code {
				t.Errorf("status %d %s, want %d %s", w.Code, w.Body, tc.status, tc.code)
			}
			if f.calls != 0 {
				t.Error("the node ran")
			}
		})
	}
}

// A run id past the grammar's bound is refused before any record is
// looked up, and the answer quotes none of it; a storage failure answers
// without the file's path.
func TestReplayLongRunIDAndStorageFailure(t *testing.T) {
	f := newFake()
	f.recordErr = fmt.Errorf("open /var/lib/secret-state/runs/%s.json: input/output error", replayRunID)
	s := New(NewCurrent(f), Options{MaxBodyBytes: 1 << 20})

	long := "run_" + strings.Repeat("a", 5000)
	atBound := "run_" + strings.Repeat("a", host.MaxRunIDHexDigits)
	for _, tc := range []struct {
		id     string
		status int
		code   string
	}{
		{long, http.StatusNotFound, "not_found"},
		{atBound + "a", http.StatusNotFound, "not_found"},
		{"run_ABC", http.StatusNotFound, "not_found"},
		// At the bound the id is looked up, and the store's failure
		// answers without the path.
		{atBound, http.StatusInternalServerError, "internal_error"},
	} {
		w := replayRequestTo(s, "/v1/runs/"+tc.id+":replay", "")
		var env struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &env)
		if w.Code != tc.status || env.Error != tc.code {
			t.Errorf("%d-byte id: status %d %s, want %d %s", len(tc.id), w.Code, w.Body, tc.status, tc.code)
		}
		if strings.Contains(w.Body.String(), strings.Repeat("a", host.MaxRunIDHexDigits+1)) || strings.Contains(w.Body.String(), "secret-state") || w.Body.Len() > 400 {
			t.Errorf("%d-byte id: the answer echoes the id or a path: %s", len(tc.id), w.Body)
		}
		if f.calls != 0 {
			t.Errorf("%d-byte id: the node ran", len(tc.id))
		}
	}
}

// A replay's Idempotency-Key reaches the run with the caller's scope; a
// kept answer carries OpenWOP-Idempotent-Replay; a malformed key is
// refused before the record is read.
func TestReplayIdempotencyKey(t *testing.T) {
	f := newFake()
	rec := &host.RunRecord{RunID: replayRunID, TypeID: "kvdemo.remember", Input: json.RawMessage(`{"key":"a"}`)}
	f.records = map[string]*host.RunRecord{replayRunID: rec}
	f.res = &host.RunResult{RunID: "run_new", Output: json.RawMessage(`{}`), Replayed: true}
	s := New(NewCurrent(f), Options{MaxBodyBytes: 1 << 20})
	const key = "replay-key-0123456789abcdef"
	req := httptest.NewRequest("POST", "/v1/runs/"+replayRunID+":replay", strings.NewReader(`{"live":["aiEnvelope"]}`))
	req.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	if w.Code != http.StatusOK || f.opts.IdempotencyKey != key || f.opts.Replay != rec {
		t.Fatalf("status %d %s; run options %+v", w.Code, w.Body, f.opts)
	}
	if got := w.Header()[HeaderIdempotentReplay]; len(got) != 1 || got[0] != "true" {
		t.Errorf("a kept answer with %s %q", HeaderIdempotentReplay, got)
	}
	// The body's spelling must agree with the header's.
	req = httptest.NewRequest("POST", "/v1/runs/"+replayRunID+":replay", strings.NewReader(`{"idempotencyKey":"another-key-0123456789abcdef"}`))
	req.Header.Set("Idempotency-Key", key)
	w = httptest.NewRecorder()
	f.calls = 0
	s.ServeHTTP(w, req)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "idempotency_key_invalid") || f.calls != 0 {
		t.Errorf("two different keys: %d %s, %d runs", w.Code, w.Body, f.calls)
	}
}
