package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"unicode"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/test/testbin"
)

// countingProvider is an OpenAI-compatible chat completions endpoint
// that counts the requests it receives. Every answer is a vote, so that
// the council's agents agree at once; other nodes take it as text.
type countingProvider struct {
	*httptest.Server
	requests atomic.Int64
}

// With echoAuth, the answer is instead the request's Authorization header,
// as a provider that repeats a credential back would answer.
func newCountingProvider(t *testing.T, echoAuth bool) *countingProvider {
	p := &countingProvider{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		p.requests.Add(1)
		content := `{"vote":"accept","rationale":"from the counting provider"}`
		if echoAuth {
			content = "you sent " + r.Header.Get("Authorization")
		}
		c, _ := json.Marshal(content) // a string always marshals
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1795947243,"model":"fixture-model",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":`+string(c)+`},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}`)
	}))
	t.Cleanup(p.Close)
	return p
}

// countingMCP is a Streamable HTTP MCP server, built with the official Go
// SDK and served by the test, with the toolbox's wordcount tool; it
// counts the tool calls it receives.
type countingMCP struct {
	*httptest.Server
	toolCalls atomic.Int64
}

type wordcountIn struct {
	Text string `json:"text"`
}

type wordcountOut struct {
	Words int `json:"words"`
	Runes int `json:"runes"`
}

func newCountingMCP(t *testing.T) *countingMCP {
	m := &countingMCP{}
	srv := gomcp.NewServer(&gomcp.Implementation{Name: "replay-toolbox", Version: "1.0.0"}, nil)
	gomcp.AddTool(srv, &gomcp.Tool{Name: "wordcount", Description: "Counts the words of a text."},
		func(_ context.Context, _ *gomcp.CallToolRequest, in wordcountIn) (*gomcp.CallToolResult, wordcountOut, error) {
			m.toolCalls.Add(1)
			return nil, wordcountOut{Words: len(strings.FieldsFunc(in.Text, unicode.IsSpace)), Runes: len([]rune(in.Text))}, nil
		})
	m.Server = httptest.NewServer(gomcp.NewStreamableHTTPHandler(func(*http.Request) *gomcp.Server { return srv },
		&gomcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(m.Close)
	return m
}

// replayEnv is the example deployment of host.hcl.example (acme.kv,
// aiEnvelope, promptLibrary, mcp, the agent runtime, the kvdemo and
// council packs) with aiEnvelope on the counting provider and the mcp
// plugin's "toolbox" server the counting MCP server.
type replayEnv struct {
	cfg, state string
	provider   *countingProvider
	mcp        *countingMCP
}

// newReplayEnv writes the config, with hostExtra in the host block, and
// publishes the prompts the example packs pin.
func newReplayEnv(t *testing.T, hostExtra string) *replayEnv {
	t.Helper()
	return newReplayEnvKeyed(t, hostExtra, "")
}

// newReplayEnvKeyed is newReplayEnv with the provider's api_key set to
// apiKey, which the provider then repeats in its answers, when not empty.
func newReplayEnvKeyed(t *testing.T, hostExtra, apiKey string) *replayEnv {
	t.Helper()
	council, err := bin.cache.Pack("examples/packs/council")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyAttr := ""
	if apiKey != "" {
		keyAttr = fmt.Sprintf("      api_key  = %q", apiKey)
	}
	e := &replayEnv{state: filepath.Join(dir, "state"), provider: newCountingProvider(t, apiKey != ""), mcp: newCountingMCP(t)}
	e.cfg = writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
  state_dir  = %q
  http {
    listen = "127.0.0.1:0"
  }
%s
}
capability "kv" {
  plugin = "wophost-kv"
}
capability "ai" {
  plugin = %q
  config {
    default_provider = "chat"
    provider "chat" {
      type     = "openai"
      base_url = "%s/v1"
      model    = "fixture-model"
%s
    }
  }
}
capability "prompts" {
  plugin   = %q
  families = ["promptLibrary"]
  config { dir = %q }
}
capability "mcp" {
  plugin = %q
  config {
    server "toolbox" { url = "%s/mcp" }
  }
}
capability "agents" { plugin = %q }
pack "community.wophost.kvdemo" { path = %q }
pack "community.wophost.council" { path = %q }
`, e.state, hostExtra, binary(t, "./plugins/aienvelope"), e.provider.URL, keyAttr, binary(t, "./plugins/promptlib"), filepath.Join(dir, "prompts"),
		binary(t, "./plugins/mcp"), e.mcp.URL, binary(t, "./plugins/agentrt"), kvdemoPack(t), council))
	res := runHost(t, "", "--config", e.cfg, "prompts", "publish", testbin.SourceDir("examples/prompts/kvdemo-describe.prompt"),
		testbin.SourceDir("examples/prompts/council-reviewer.prompt"), testbin.SourceDir("examples/prompts/council-maintainer.prompt"))
	if res.code != 0 {
		t.Fatalf("publish the example prompts: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	return e
}

// counts is what the outer edges have received so far.
func (e *replayEnv) counts() (provider, toolCalls int64) {
	return e.provider.requests.Load(), e.mcp.toolCalls.Load()
}

// runLine is the JSON line `host --json run` prints on stderr about the
// run's record and, for a replay, the replay.
type runLine struct {
	RunID     string                  `json:"runId"`
	RunRecord string                  `json:"runRecord"`
	Replay    *dispatch.ReplaySummary `json:"replay"`
}

// hostRun is one `host --json run` and what it printed.
type hostRun struct {
	result
	line runLine
}

// runJSON runs `host --config cfg --json run ARGS...` and decodes its
// stderr line.
func runJSON(t *testing.T, cfg string, args ...string) hostRun {
	t.Helper()
	return runJSONIn(t, cfg, "", args...)
}

// runJSONIn is runJSON with stdin.
func runJSONIn(t *testing.T, cfg, stdin string, args ...string) hostRun {
	t.Helper()
	res := runHost(t, stdin, append([]string{"--config", cfg, "--json", "run"}, args...)...)
	r := hostRun{result: res}
	for _, l := range strings.Split(res.stderr, "\n") {
		if strings.HasPrefix(l, `{"`) && strings.Contains(l, `"runId"`) {
			if err := json.Unmarshal([]byte(l), &r.line); err != nil {
				t.Fatalf("stderr line %s: %v", l, err)
			}
		}
	}
	if r.line.RunID == "" {
		t.Fatalf("run %v: no run line on stderr; exit %d\nstdout: %s\nstderr: %s", args, res.code, res.stdout, res.stderr)
	}
	return r
}

// record runs typeID with the input file of examples/inputs and wants it
// to succeed.
func (e *replayEnv) record(t *testing.T, typeID, input string) hostRun {
	t.Helper()
	r := runJSON(t, e.cfg, typeID, "--input", input)
	if r.code != 0 {
		t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", typeID, r.code, r.stdout, r.stderr)
	}
	return r
}

// failedOutcome is the outcome `host run` prints for a node that ran and
// failed.
type failedOutcome struct {
	RunID  string `json:"runId"`
	Status string `json:"status"`
	Error  struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details struct {
			Code        string `json:"code"`
			SourceRunID string `json:"sourceRunId"`
			Key         string `json:"key"`
			Seq         string `json:"seq"`
			// Cause is the refusal that is new, when the source run's
			// call succeeded.
			Cause struct {
				Code string `json:"code"`
			} `json:"cause"`
		} `json:"details"`
	} `json:"error"`
}

func decodeFailed(t *testing.T, r hostRun) failedOutcome {
	t.Helper()
	var o failedOutcome
	if r.code != 1 || json.Unmarshal([]byte(r.stdout), &o) != nil || o.Status != "failed" {
		t.Fatalf("want a failed outcome and exit 1; exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	return o
}

// readRecord reads the run record of runID from the env's state.
func readRecord(t *testing.T, state, runID string) *host.RunRecord {
	t.Helper()
	rec, err := host.ReadRunRecord(filepath.Join(state, host.RunsDir, runID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// sources lists a replay's calls as seq family.method source, for
// failure messages.
func sources(l *dispatch.InvocationLog) string {
	if l == nil {
		return "no log"
	}
	var b strings.Builder
	for _, c := range l.Calls {
		fmt.Fprintf(&b, "%d %s.%s source %q, error %v, redacted %v, %d result bytes; ", c.Seq, c.Family, c.Method, c.Source, c.Error != nil, c.Redacted, len(c.Result))
	}
	return b.String()
}

func input(name string) string { return testbin.SourceDir("examples/inputs/" + name) }

// Every node of the example packs, recorded with its calls reaching the
// counting provider and MCP server, replays to the same bytes on stdout
// with no request reaching either, and nothing diverges.
func TestReplayExamplePacks(t *testing.T) {
	e := newReplayEnv(t, "")
	for _, n := range []struct {
		typeID, input string
		// provider and mcp say whether recording the node reaches them.
		provider, mcp bool
		// served is how many calls the replay answers from the log.
		served int
	}{
		// A side-effect node: answered from its record, no call made.
		{"kvdemo.remember", "remember.json", false, false, 0},
		{"kvdemo.recall", "recall.json", false, false, 0},
		{"kvdemo.describe", "recall.json", true, false, 1},          // aiEnvelope.generate
		{"kvdemo.wordcount", "recall.json", false, true, 1},         // mcp.callTool
		{"council.decide", "council-proposal.json", true, false, 3}, // two spawns and the consensus
	} {
		t.Run(n.typeID, func(t *testing.T) {
			p0, m0 := e.counts()
			orig := e.record(t, n.typeID, input(n.input))
			p1, m1 := e.counts()
			if (p1 > p0) != n.provider || (m1 > m0) != n.mcp {
				t.Fatalf("recording reached the provider %d times and the MCP server %d times; want provider %v, mcp %v", p1-p0, m1-m0, n.provider, n.mcp)
			}
			if rec := readRecord(t, e.state, orig.line.RunID); rec.Invocations == nil || len(rec.Invocations.Calls) == 0 || rec.Invocations.Truncated {
				t.Fatalf("record of %s holds no whole invocation log: %+v", n.typeID, rec.Invocations)
			}

			rep := runJSON(t, e.cfg, "--replay", orig.line.RunID)
			if rep.code != 0 {
				t.Fatalf("replay: exit %d\nstdout: %s\nstderr: %s", rep.code, rep.stdout, rep.stderr)
			}
			if rep.stdout != orig.stdout {
				t.Errorf("replay printed\n%s\nthe original run\n%s", rep.stdout, orig.stdout)
			}
			if p2, m2 := e.counts(); p2 != p1 || m2 != m1 {
				t.Errorf("during the replay the provider got %d requests and the MCP server %d tool calls; want none", p2-p1, m2-m1)
			}
			s := rep.line.Replay
			if s == nil || s.Source != orig.line.RunID || s.Diverged != 0 || s.Branch || s.Served != n.served ||
				(s.Node == dispatch.NodeFromRecord) != (n.typeID == "kvdemo.remember") {
				t.Fatalf("replay summary %+v; want source %s, %d served, 0 diverged, no branch", s, orig.line.RunID, n.served)
			}
			if rep.line.RunID == orig.line.RunID {
				t.Errorf("the replay has the original's run id")
			}
			if rec := readRecord(t, e.state, rep.line.RunID); rec.ReplayOf != orig.line.RunID || rec.Replay == nil || rec.Replay.Served != n.served {
				t.Errorf("replay's record: replayOf %q, replay %+v", rec.ReplayOf, rec.Replay)
			}
		})
	}
	t.Run("from the record file, and a replay of the replay", func(t *testing.T) {
		p0, _ := e.counts()
		orig := e.record(t, "kvdemo.describe", input("recall.json"))
		p1, _ := e.counts()
		if orig.line.RunRecord == "" || p1 != p0+1 {
			t.Fatalf("record %q, provider requests %d", orig.line.RunRecord, p1-p0)
		}
		byFile := runJSON(t, e.cfg, "--replay", orig.line.RunRecord)
		if byFile.code != 0 || byFile.stdout != orig.stdout || byFile.line.Replay == nil || byFile.line.Replay.Diverged != 0 {
			t.Fatalf("replay of %s: exit %d, summary %+v\n%s%s", orig.line.RunRecord, byFile.code, byFile.line.Replay, byFile.stdout, byFile.stderr)
		}
		again := runJSON(t, e.cfg, "--replay", byFile.line.RunID)
		if s := again.line.Replay; again.code != 0 || again.stdout != orig.stdout || s == nil || s.Source != byFile.line.RunID || s.Served != 1 || s.Diverged != 0 {
			t.Fatalf("replay of the replay: exit %d, summary %+v\n%s%s", again.code, s, again.stdout, again.stderr)
		}
		if p2, _ := e.counts(); p2 != p1 {
			t.Errorf("the replays reached the provider %d times", p2-p1)
		}
	})

	// Without --json the summary is a line on stderr.
	orig := e.record(t, "kvdemo.recall", input("recall.json"))
	res := runHost(t, "", "--config", e.cfg, "run", "--replay", orig.line.RunID)
	if want := "replay of " + orig.line.RunID + ": 0 calls served from the log, 1 run live, 0 diverged"; res.code != 0 || !strings.Contains(res.stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant %q", res.code, res.stderr, want)
	}
}

// A node whose code asks something else on replay than it did when
// recorded diverges at that call: the summary names the call and both
// invocation keys, the call (it has effects) fails the replay with
// replay_source_missing, and the replay goes on with the node's next
// call, answered from the log.
func TestReplayCodeChangeDiverges(t *testing.T) {
	dir := t.TempDir()
	pack := probePack(t)
	cfg := func(variant string) string {
		path := filepath.Join(dir, "host-"+variant+".hcl")
		text := fmt.Sprintf(`
host {
  plugin_dir = %q
  state_dir  = %q
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" {
  path = %q
  env  = { PROBE_VARIANT = %q }
}
`, bin.dir, filepath.Join(dir, "state"), pack, variant)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	oldCode, newCode := cfg("old"), cfg("new")
	orig := runJSON(t, oldCode, "probe.steps")
	if orig.code != 0 {
		t.Fatalf("record: exit %d\n%s%s", orig.code, orig.stdout, orig.stderr)
	}
	// The same node, unchanged, replays without a divergence.
	if same := runJSON(t, oldCode, "--replay", orig.line.RunID); same.code != 0 || same.stdout != orig.stdout ||
		same.line.Replay == nil || same.line.Replay.Diverged != 0 || same.line.Replay.Served != 3 {
		t.Fatalf("replay with the same code: exit %d, summary %+v\n%s%s", same.code, same.line.Replay, same.stdout, same.stderr)
	}

	rec := readRecord(t, filepath.Join(dir, "state"), orig.line.RunID)
	if len(rec.Invocations.Calls) != 3 {
		t.Fatalf("recorded calls %+v", rec.Invocations.Calls)
	}
	recorded := rec.Invocations.Calls[1]
	if want := dispatch.InvocationKey("test.echo", "echo", []byte(`{"step":2,"variant":"old"}`)); recorded.Key != want || recorded.Seq != 2 {
		t.Fatalf("recorded call 2: seq %d key %s; want key %s", recorded.Seq, recorded.Key, want)
	}
	newKey := dispatch.InvocationKey("test.echo", "echo", []byte(`{"step":2,"variant":"new"}`))

	rep := runJSON(t, newCode, "--replay", orig.line.RunID)
	out := decodeFailed(t, rep)
	if out.Error.Code != dispatch.CodeReplaySourceMissing || out.Error.Details.Key != newKey || out.Error.Details.Seq != "2" {
		t.Errorf("outcome %+v; want %s at call 2, key %s", out.Error, dispatch.CodeReplaySourceMissing, newKey)
	}
	s := rep.line.Replay
	if s == nil || len(s.Divergences) == 0 {
		t.Fatalf("no divergence: %+v\n%s", s, rep.stderr)
	}
	d := s.Divergences[0]
	if d.Seq != 2 || d.Family != "test.echo" || d.Method != "echo" || d.Key != newKey || d.RecordedKey != recorded.Key || d.RecordedSeq != 2 {
		t.Errorf("first divergence %+v; want call 2 test.echo.echo, key %s, recorded key %s at 2", d, newKey, recorded.Key)
	}
	// Calls 1 and 3 were answered from the log: the node went on past
	// the divergence. The source's call 2, never made again, diverges too.
	if s.Served != 2 || s.Live != 0 || s.Diverged != 2 || s.Branch {
		t.Errorf("summary %+v; want 2 served, 0 live, 2 diverged", s)
	}
	if rr := readRecord(t, filepath.Join(dir, "state"), rep.line.RunID); len(rr.Invocations.Calls) != 3 ||
		rr.Invocations.Calls[2].Source != dispatch.SourceLog || rr.Invocations.Calls[1].Error == nil {
		t.Errorf("replay's log: %s", sources(rr.Invocations))
	}
	// Without --json: the line names the call and both keys.
	res := runHost(t, "", "--config", newCode, "run", "--replay", orig.line.RunID)
	want := fmt.Sprintf("first divergence: call 2, test.echo.echo (key %s; the source run's: %s)", newKey, recorded.Key)
	if res.code != 1 || !strings.Contains(res.stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant %q", res.code, res.stderr, want)
	}
}

// A call the source run's log lost at its bound cannot be replayed: the
// replay fails with replay_source_missing and the MCP server is not
// called.
func TestReplayCutLogSourceMissing(t *testing.T) {
	e := newReplayEnv(t, "  runs {\n    log_max_calls = 1\n  }")
	e.record(t, "kvdemo.remember", input("remember.json"))
	_, m0 := e.counts()
	orig := e.record(t, "kvdemo.wordcount", input("recall.json"))
	_, m1 := e.counts()
	if m1 != m0+1 {
		t.Fatalf("recording made %d tool calls, want 1", m1-m0)
	}
	rec := readRecord(t, e.state, orig.line.RunID)
	// The log keeps acme.kv.get and drops mcp.callTool (and the mcp
	// plugin's callbacks during it).
	if l := rec.Invocations; l == nil || !l.Truncated || l.Dropped < 1 || len(l.Calls) != 1 || l.Calls[0].Family != "acme.kv" {
		t.Fatalf("record's log %+v; want acme.kv.get kept, mcp.callTool dropped", l)
	}
	rep := runJSON(t, e.cfg, "--replay", orig.line.RunID)
	out := decodeFailed(t, rep)
	if out.Error.Code != dispatch.CodeReplaySourceMissing || !strings.Contains(out.Error.Message, "cut after 1 calls") {
		t.Errorf("outcome %+v; want %s naming the cut log", out.Error, dispatch.CodeReplaySourceMissing)
	}
	if _, m2 := e.counts(); m2 != m1 {
		t.Errorf("the replay made %d tool calls; want none", m2-m1)
	}
	if s := rep.line.Replay; s == nil || s.Diverged == 0 || s.Divergences[0].Method != "callTool" {
		t.Errorf("summary %+v", s)
	}
}

// kvCall runs `host call acme.kv.METHOD` with payload.
func (e *replayEnv) kvCall(t *testing.T, method, payload string) result {
	t.Helper()
	return runHost(t, payload, "--config", e.cfg, "--json", "call", "acme.kv."+method, "--input", "-")
}

// kvValue is what the store holds under key: its value and version, or
// the refusal's code.
func (e *replayEnv) kvValue(t *testing.T, key string) string {
	t.Helper()
	res := e.kvCall(t, "get", fmt.Sprintf(`{"key":%q}`, key))
	var v struct {
		Value   string `json:"value"`
		Version int    `json:"version"`
		Code    string `json:"code"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &v); err != nil {
		t.Fatalf("get %s: exit %d\n%s%s", key, res.code, res.stdout, res.stderr)
	}
	if v.Code != "" {
		return v.Code
	}
	return fmt.Sprintf("%s@%d", v.Value, v.Version)
}

// A vendor method without a pure declaration (acme.kv.put) is answered
// from the log: the store is not written on replay. A declared pure one
// (acme.kv.get) runs live: its different answer is a divergence, and a
// refusal where the source succeeded fails the replay.
func TestReplayVendorPurity(t *testing.T) {
	e := newReplayEnv(t, "")
	const key = "replay-purity"
	orig := runJSONIn(t, e.cfg, fmt.Sprintf(`{"key":%q,"value":"first"}`, key), "kvdemo.remember", "--input", "-")
	if orig.code != 0 || e.kvValue(t, key) != "first@1" {
		t.Fatalf("record: exit %d\n%s%s", orig.code, orig.stdout, orig.stderr)
	}

	t.Run("overwritten", func(t *testing.T) {
		if res := e.kvCall(t, "put", fmt.Sprintf(`{"key":%q,"value":"second"}`, key)); res.code != 0 {
			t.Fatalf("put: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		// kvdemo.remember is a side-effect node: named in live, its code
		// runs again, and its calls still go by the log.
		rep := runJSON(t, e.cfg, "--replay", orig.line.RunID, "--live", "kvdemo.remember")
		if rep.code != 0 {
			t.Fatalf("replay: exit %d\n%s%s", rep.code, rep.stdout, rep.stderr)
		}
		// The put was answered from the log: a performed put would have
		// made it first@3.
		if got := e.kvValue(t, key); got != "second@2" {
			t.Errorf("after the replay the store holds %s; want second@2", got)
		}
		s := rep.line.Replay
		if s == nil || s.Served != 1 || s.Live != 1 || s.Diverged != 1 || !s.Branch {
			t.Fatalf("summary %+v; want a branch, 1 served, 1 live, 1 diverged", s)
		}
		if d := s.Divergences[0]; d.Seq != 2 || d.Family != "acme.kv" || d.Method != "get" || d.Key != d.RecordedKey ||
			!strings.Contains(d.Reason, "answered differently") {
			t.Errorf("divergence %+v; want call 2 acme.kv.get answered differently", d)
		}
		// The live answer is what the node returned.
		if !strings.Contains(rep.stdout, `"second"`) {
			t.Errorf("replay output %s", rep.stdout)
		}
	})

	t.Run("deleted", func(t *testing.T) {
		if res := e.kvCall(t, "delete", fmt.Sprintf(`{"key":%q}`, key)); res.code != 0 {
			t.Fatalf("delete: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		rep := runJSON(t, e.cfg, "--replay", orig.line.RunID, "--live", "kvdemo.remember")
		out := decodeFailed(t, rep)
		if out.Error.Code != dispatch.CodeReplayDivergedAtRefusal || out.Error.Details.Cause.Code != "acme.key_not_found" {
			t.Errorf("outcome %+v; want %s caused by acme.key_not_found", out.Error, dispatch.CodeReplayDivergedAtRefusal)
		}
		if got := e.kvValue(t, key); got != "acme.key_not_found" {
			t.Errorf("after the replay the store holds %s; want the key absent", got)
		}
		if s := rep.line.Replay; s == nil || s.Served != 1 || s.Diverged != 1 || s.Divergences[0].Method != "get" {
			t.Errorf("summary %+v", s)
		}
	})

	// The reverse: refused in the source run, answered now.
	t.Run("refused, then stored", func(t *testing.T) {
		const missing = "replay-purity-later"
		orig := runJSONIn(t, e.cfg, fmt.Sprintf(`{"key":%q}`, missing), "kvdemo.recall", "--input", "-")
		if o := decodeFailed(t, orig); o.Error.Code != "acme.key_not_found" {
			t.Fatalf("recall of a missing key: %+v", o.Error)
		}
		if res := e.kvCall(t, "put", fmt.Sprintf(`{"key":%q,"value":"now"}`, missing)); res.code != 0 {
			t.Fatalf("put: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		rep := runJSON(t, e.cfg, "--replay", orig.line.RunID)
		out := decodeFailed(t, rep)
		if out.Error.Code != dispatch.CodeReplayDivergedAtRefusal || out.Error.Details.Code != "acme.key_not_found" {
			t.Errorf("outcome %+v; want %s, the source's refusal acme.key_not_found", out.Error, dispatch.CodeReplayDivergedAtRefusal)
		}
		if s := rep.line.Replay; s == nil || s.Live != 1 || s.Diverged != 1 || !strings.Contains(s.Divergences[0].Reason, "succeeded now") {
			t.Errorf("summary %+v", s)
		}
	})
}

// replayReply is the answer of POST /v1/runs/{runId}:replay.
type replayReply struct {
	RunID  string                  `json:"runId"`
	Status string                  `json:"status"`
	Output json.RawMessage         `json:"output"`
	Replay *dispatch.ReplaySummary `json:"replay"`
	Error  string                  `json:"error"`
}

func postReplay(t *testing.T, base, runID, body string) (int, replayReply) {
	t.Helper()
	resp, err := http.Post(base+"/v1/runs/"+runID+":replay", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var r replayReply
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("replay %s: %d %s: %v", runID, resp.StatusCode, data, err)
	}
	return resp.StatusCode, r
}

// POST /v1/runs/{runId}:replay on `host serve` replays a run recorded by
// an execute: 200 with the outcome and the replay's summary, nothing
// reaching the provider; a run id with no record is 404 not_found.
func TestReplayServe(t *testing.T) {
	e := newReplayEnv(t, "")
	d := startServe(t, e.cfg)
	if r := remember(t, d.base, "greeting", "hello from the kv plugin", ""); !r.ok() {
		t.Fatalf("remember: %d %s", r.status, r.body)
	}
	p0, _ := e.counts()
	orig := executeNode(t, d.base, "kvdemo.describe", `{"input":{"key":"greeting"}}`, nil)
	p1, _ := e.counts()
	if !orig.ok() || p1 != p0+1 {
		t.Fatalf("describe: %d %s; provider requests %d", orig.status, orig.body, p1-p0)
	}
	var origOut struct {
		Output json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal([]byte(orig.body), &origOut); err != nil {
		t.Fatal(err)
	}

	status, r := postReplay(t, d.base, orig.RunID, "")
	if status != 200 || r.Status != "succeeded" || r.RunID == "" || r.RunID == orig.RunID || string(r.Output) != string(origOut.Output) {
		t.Fatalf("replay: %d %+v; want 200, succeeded, output %s", status, r, origOut.Output)
	}
	if s := r.Replay; s == nil || s.Source != orig.RunID || s.Served != 1 || s.Live != 2 || s.Diverged != 0 || s.Branch {
		t.Errorf("summary %+v; want generate served, acme.kv.get and promptLibrary.get live, 0 diverged", s)
	}
	if p2, _ := e.counts(); p2 != p1 {
		t.Errorf("the replay reached the provider %d times", p2-p1)
	}

	// A body naming live calls makes a branch: the tool call reaches the
	// MCP server again.
	wc := executeNode(t, d.base, "kvdemo.wordcount", `{"input":{"key":"greeting"}}`, nil)
	if !wc.ok() {
		t.Fatalf("wordcount: %d %s", wc.status, wc.body)
	}
	_, m0 := e.counts()
	status, r = postReplay(t, d.base, wc.RunID, `{"live":["mcp.callTool"]}`)
	if s := r.Replay; status != 200 || r.Status != "succeeded" || s == nil || !s.Branch || s.Live != 2 || s.Diverged != 0 {
		t.Errorf("branch: %d %+v %+v", status, r, s)
	}
	if _, m1 := e.counts(); m1 != m0+1 {
		t.Errorf("the branch made %d tool calls; want 1", m1-m0)
	}
	status, r = postReplay(t, d.base, wc.RunID, `{"live":["mcp callTool"]}`)
	if status != 400 || r.Error != "validation_error" {
		t.Errorf("a malformed live call: %d %+v; want 400 validation_error", status, r)
	}

	status, r = postReplay(t, d.base, "run_0123456789abcdef0123456789abcdef", "")
	if status != 404 || r.Error != "not_found" {
		t.Errorf("unknown run: %d %+v; want 404 not_found", status, r)
	}
}

// --live mcp.callTool turns the replay into a branch: the tool call
// reaches the MCP server again, and the summary says so.
func TestReplayLiveBranch(t *testing.T) {
	e := newReplayEnv(t, "")
	e.record(t, "kvdemo.remember", input("remember.json"))
	orig := e.record(t, "kvdemo.wordcount", input("recall.json"))
	_, m0 := e.counts()

	rep := runJSON(t, e.cfg, "--replay", orig.line.RunID, "--live", "mcp.callTool")
	if rep.code != 0 || rep.stdout != orig.stdout {
		t.Fatalf("branch: exit %d\n%s%s\nwant output %s", rep.code, rep.stdout, rep.stderr, orig.stdout)
	}
	if _, m1 := e.counts(); m1 != m0+1 {
		t.Errorf("the branch made %d tool calls; want 1", m1-m0)
	}
	if s := rep.line.Replay; s == nil || !s.Branch || s.Served != 0 || s.Live != 2 || s.Diverged != 0 {
		t.Errorf("summary %+v; want a branch, 2 live, 0 served", s)
	}
	if rr := readRecord(t, e.state, rep.line.RunID); rr.Invocations.Calls[1].Source != dispatch.SourceLive {
		t.Errorf("branch's log: %s", sources(rr.Invocations))
	}
	res := runHost(t, "", "--config", e.cfg, "run", "--replay", orig.line.RunID, "--live", "mcp.callTool")
	if res.code != 0 || !strings.Contains(res.stderr, "branch (calls with effects ran live) of "+orig.line.RunID+": 0 calls served from the log, 2 run live, 0 diverged") {
		t.Errorf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

// An answer that holds a configured secret (here the provider's api_key,
// repeated back by the provider) never enters the run record; a replay
// cannot answer that call from the log and fails with
// replay_source_missing, without calling the provider.
func TestReplaySecretNeverLogged(t *testing.T) {
	const secret = "sk-replay-secret-0123456789"
	e := newReplayEnvKeyed(t, "", secret)
	e.record(t, "kvdemo.remember", input("remember.json"))
	p0, _ := e.counts()
	orig := e.record(t, "kvdemo.describe", input("recall.json"))
	p1, _ := e.counts()
	if p1 != p0+1 || !strings.Contains(orig.stdout, secret) {
		t.Fatalf("the provider did not repeat the key (%d requests): %s", p1-p0, orig.stdout)
	}
	data, err := os.ReadFile(orig.line.RunRecord)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secret) {
		t.Errorf("the run record %s holds the api key", orig.line.RunRecord)
	}
	rec := readRecord(t, e.state, orig.line.RunID)
	var generate *dispatch.Invocation
	for i, c := range rec.Invocations.Calls {
		if c.Family == "aiEnvelope" && c.Method == "generate" {
			generate = &rec.Invocations.Calls[i]
		}
	}
	if generate == nil || !generate.Redacted || generate.Result != nil {
		t.Fatalf("generate in the log: %s", sources(rec.Invocations))
	}
	rep := runJSON(t, e.cfg, "--replay", orig.line.RunID)
	out := decodeFailed(t, rep)
	if out.Error.Code != dispatch.CodeReplaySourceMissing || !strings.Contains(out.Error.Message, "sensitive value") {
		t.Errorf("outcome %+v; want %s for the redacted outcome", out.Error, dispatch.CodeReplaySourceMissing)
	}
	if p2, _ := e.counts(); p2 != p1 {
		t.Errorf("the replay reached the provider %d times", p2-p1)
	}
	if strings.Contains(rep.stdout+rep.stderr, secret) {
		t.Errorf("the replay printed the api key:\n%s%s", rep.stdout, rep.stderr)
	}
}
