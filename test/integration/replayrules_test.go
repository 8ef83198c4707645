package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wophost/wophost/core/dispatch"
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

// A keyed replay runs once: a retry with the same key gets the kept
// answer (the same run, OpenWOP-Idempotent-Replay) and the live tool call
// is not made again; the key on another replay request, or on an
// execute, is a mismatch; a key outside the grammar is 400.
func TestReplayServeIdempotencyKey(t *testing.T) {
	e := newReplayEnv(t, "")
	d := startServe(t, e.cfg)
	if r := remember(t, d.base, "greeting", "hello from the kv plugin", ""); !r.ok() {
		t.Fatalf("remember: %d %s", r.status, r.body)
	}
	wc := executeNode(t, d.base, "kvdemo.wordcount", `{"input":{"key":"greeting"}}`, nil)
	if !wc.ok() {
		t.Fatalf("wordcount: %d %s", wc.status, wc.body)
	}
	key := map[string]string{"Idempotency-Key": newKey("replay")}
	_, m0 := e.counts()
	status, first, h1 := replayRaw(t, d.base, wc.RunID, `{"live":["mcp.callTool"]}`, key)
	_, m1 := e.counts()
	var r1, r2 replayReply
	if err := json.Unmarshal([]byte(first), &r1); err != nil || status != 200 || r1.Status != "succeeded" || r1.Replay == nil || !r1.Replay.Branch {
		t.Fatalf("keyed branch: %d %s", status, first)
	}
	if m1 != m0+1 || h1.Get("OpenWOP-Idempotent-Replay") != "" {
		t.Fatalf("keyed branch: %d tool calls, header %q; want 1, none", m1-m0, h1.Get("OpenWOP-Idempotent-Replay"))
	}
	// The retry, with the live calls in another order and repeated.
	status, again, h2 := replayRaw(t, d.base, wc.RunID, `{"live":["mcp.callTool","mcp.callTool"]}`, key)
	if err := json.Unmarshal([]byte(again), &r2); err != nil || status != 200 || r2.RunID != r1.RunID || string(r2.Output) != string(r1.Output) {
		t.Fatalf("retry: %d %s; want the kept answer of run %s", status, again, r1.RunID)
	}
	if h2.Get("OpenWOP-Idempotent-Replay") != "true" || r2.Replay == nil || !reflect.DeepEqual(r2.Replay, r1.Replay) {
		t.Errorf("retry: header %q, summary %+v; want true and the first summary %+v", h2.Get("OpenWOP-Idempotent-Replay"), r2.Replay, r1.Replay)
	}
	if _, m2 := e.counts(); m2 != m1 {
		t.Errorf("the retried branch made %d more tool calls", m2-m1)
	}

	status, body, _ := replayRaw(t, d.base, wc.RunID, "", key)
	if code, _ := refusalReason(t, body); status != 409 || code != "idempotency_key_mismatch" {
		t.Errorf("the key on a replay without live calls: %d %s; want 409 idempotency_key_mismatch", status, body)
	}
	if r := executeNode(t, d.base, "kvdemo.wordcount", `{"input":{"key":"greeting"}}`, key); r.status != 409 || !strings.Contains(r.body, "idempotency_key_mismatch") {
		t.Errorf("the key on an execute: %d %s; want 409 idempotency_key_mismatch", r.status, r.body)
	}
	status, body, _ = replayRaw(t, d.base, wc.RunID, "", map[string]string{"Idempotency-Key": "short"})
	if code, _ := refusalReason(t, body); status != 400 || code != "idempotency_key_invalid" {
		t.Errorf("a malformed key: %d %s; want 400 idempotency_key_invalid", status, body)
	}
	if _, m3 := e.counts(); m3 != m1 {
		t.Errorf("refused requests made %d tool calls", m3-m1)
	}
}

// A node with the role side-effect is answered from its record on replay:
// its code, which appends a line to a file, does not run, by the CLI or
// over HTTP, and the replay answers the recorded output; named in live,
// the node runs again and the replay is a branch.
func TestReplaySideEffectNodeFromRecord(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfigAsIs(t, fmt.Sprintf(`
host {
  plugin_dir = %q
  state_dir  = %q
  http {
    listen = "127.0.0.1:0"
  }
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" {
  path = %q
  # The test has it write where the test looks, or start processes:
  # it runs uncontained (containment has its own tests).
  sandbox { enabled = false }
}
`, bin.dir, filepath.Join(dir, "state"), probePack(t)))
	effects := filepath.Join(dir, "effects.txt")
	lines := func() int {
		data, err := os.ReadFile(effects)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(data), "\n")
	}
	orig := runJSONIn(t, cfg, fmt.Sprintf(`{"file":%q,"line":"recorded"}`, effects), "probe.append", "--input", "-")
	if orig.code != 0 || strings.TrimSpace(orig.stdout) != `{"lines":1}` && !strings.Contains(orig.stdout, `"lines": 1`) || lines() != 1 {
		t.Fatalf("record: exit %d, %d lines\n%s%s", orig.code, lines(), orig.stdout, orig.stderr)
	}

	rep := runJSON(t, cfg, "--replay", orig.line.RunID)
	if rep.code != 0 || rep.stdout != orig.stdout {
		t.Fatalf("replay: exit %d\n%s%s\nwant output %s", rep.code, rep.stdout, rep.stderr, orig.stdout)
	}
	if n := lines(); n != 1 {
		t.Errorf("the replay ran the node's code: the file holds %d lines", n)
	}
	if s := rep.line.Replay; s == nil || s.Node != dispatch.NodeFromRecord || s.Branch || s.Source != orig.line.RunID {
		t.Errorf("summary %+v; want the node answered from its record", s)
	}
	// The replay's record replays in turn, again without running the node.
	again := runJSON(t, cfg, "--replay", rep.line.RunID)
	if again.code != 0 || again.stdout != orig.stdout || lines() != 1 {
		t.Errorf("replay of the replay: exit %d, %d lines\n%s%s", again.code, lines(), again.stdout, again.stderr)
	}
	// Naming another node, or a family, in live changes nothing.
	if near := runJSON(t, cfg, "--replay", orig.line.RunID, "--live", "probe.appen,test.echo"); near.code != 0 || lines() != 1 {
		t.Errorf("live naming a near miss: exit %d, %d lines\n%s", near.code, lines(), near.stderr)
	}

	// Named in live, the node runs again: a branch.
	branch := runJSON(t, cfg, "--replay", orig.line.RunID, "--live", "probe.append")
	if branch.code != 0 || lines() != 2 || !strings.Contains(branch.stdout, "2") {
		t.Errorf("branch: exit %d, %d lines\n%s%s", branch.code, lines(), branch.stdout, branch.stderr)
	}
	if s := branch.line.Replay; s == nil || !s.Branch || s.Node != "" {
		t.Errorf("branch summary %+v; want a branch that ran the node", s)
	}

	// Over HTTP, the same.
	d := startServe(t, cfg)
	status, body, _ := replayRaw(t, d.base, orig.line.RunID, "", nil)
	var r replayReply
	if err := json.Unmarshal([]byte(body), &r); err != nil || status != 200 || r.Status != "succeeded" || r.Replay == nil || r.Replay.Node != dispatch.NodeFromRecord {
		t.Errorf("POST replay: %d %s", status, body)
	}
	if n := lines(); n != 2 {
		t.Errorf("the HTTP replay ran the node's code: the file holds %d lines; want 2", n)
	}
	status, body, _ = replayRaw(t, d.base, orig.line.RunID, `{"live":["probe.append"]}`, nil)
	if status != 200 || lines() != 3 {
		t.Errorf("POST branch: %d %s, %d lines; want 3", status, body, lines())
	}
}
