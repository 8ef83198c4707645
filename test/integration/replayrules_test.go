package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wophost/wophost/core/host"
)

// replayRaw posts a replay and returns its status and body.
func replayRaw(t *testing.T, base, runID, body string, header map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/v1/runs/"+runID+":replay", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data), resp.Header
}

// refusalReason decodes an error envelope's code and details.reason.
func refusalReason(t *testing.T, body string) (code, reason string) {
	t.Helper()
	var env struct {
		Error   string `json:"error"`
		Details struct {
			Reason string `json:"reason"`
		} `json:"details"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	return env.Error, env.Details.Reason
}

// Through `host serve`: a run id over the bound is 404 without the state
// path or the id; a record whose logged tool result was altered, one cut
// short and one that is a link are 409 replay_source_missing naming why,
// and none reaches the MCP server.
func TestReplayServeRefusesUntrustedRecords(t *testing.T) {
	e := newReplayEnv(t, "")
	d := startServe(t, e.cfg)
	if r := remember(t, d.base, "greeting", "hello from the kv plugin", ""); !r.ok() {
		t.Fatalf("remember: %d %s", r.status, r.body)
	}
	wordcount := func() (runID, path string) {
		r := executeNode(t, d.base, "kvdemo.wordcount", `{"input":{"key":"greeting"}}`, nil)
		if !r.ok() {
			t.Fatalf("wordcount: %d %s", r.status, r.body)
		}
		return r.RunID, filepath.Join(e.state, host.RunsDir, r.RunID+".json")
	}

	long := "run_" + strings.Repeat("0", 5000)
	status, body, _ := replayRaw(t, d.base, long, "", nil)
	if code, _ := refusalReason(t, body); status != 404 || code != "not_found" || strings.Contains(body, e.state) || len(body) > 400 {
		t.Errorf("a 5004-byte run id: %d %.500s; want a short 404 not_found naming no path", status, body)
	}

	_, m0 := e.counts()
	altered, path := wordcount()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	var log struct {
		Calls     []map[string]json.RawMessage `json:"calls"`
		Truncated bool                         `json:"truncated"`
	}
	if err := json.Unmarshal(rec["invocations"], &log); err != nil {
		t.Fatal(err)
	}
	forged := 0
	for _, c := range log.Calls {
		if string(c["method"]) == `"callTool"` {
			c["result"] = json.RawMessage(`{"content":[{"type":"text","text":"one two three four five six"}]}`)
			forged++
		}
	}
	if forged != 1 {
		t.Fatalf("the record logs %d tool calls; want 1", forged)
	}
	rec["invocations"], _ = json.Marshal(log)
	data, _ = json.Marshal(rec)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	cut, cutPath := wordcount()
	data, err = os.ReadFile(cutPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cutPath, data[:len(data)*2/3], 0o600); err != nil {
		t.Fatal(err)
	}

	linked, linkPath := wordcount()
	elsewhere := filepath.Join(t.TempDir(), "record.json")
	if err := os.Rename(linkPath, elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, linkPath); err != nil {
		t.Fatal(err)
	}
	_, m1 := e.counts()
	if m1 != m0+3 {
		t.Fatalf("three runs made %d tool calls", m1-m0)
	}

	for _, tc := range []struct{ runID, reason string }{
		{altered, host.RecordDigestMismatch}, {cut, host.RecordTruncated}, {linked, host.RecordLink},
	} {
		status, body, _ := replayRaw(t, d.base, tc.runID, `{"live":["mcp.callTool"]}`, nil)
		code, reason := refusalReason(t, body)
		if status != 409 || code != "replay_source_missing" || reason != tc.reason {
			t.Errorf("replay of a record (%s): %d %s; want 409 replay_source_missing, reason %s", tc.reason, status, body, tc.reason)
		}
		if strings.Contains(body, e.state) || strings.Contains(body, elsewhere) {
			t.Errorf("the answer names a path: %s", body)
		}
	}
	if _, m2 := e.counts(); m2 != m1 {
		t.Errorf("refused replays made %d tool calls", m2-m1)
	}
}
