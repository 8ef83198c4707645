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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/sdk/wop"
)

// aiRules scripts an agent loop for the local provider: a tool call
// first, then an answer once the tool has replied.
const aiRules = `{"rules":[
  {"on":"tool","text":"The weather is fine."},
  {"match":"(?i)weather","toolCalls":[{"name":"get_weather","arguments":{"city":"Paris"}}]}
]}`

// aiConfig writes a host config serving test.echo (the probe pack needs
// it), aiEnvelope from the real plugin with body as its config block, and
// the probe pack.
func aiConfig(t *testing.T, body string) string {
	t.Helper()
	return aiConfigWith(t, "", body)
}

// aiConfigWith is aiConfig with attrs added to the aiEnvelope
// capability block.
func aiConfigWith(t *testing.T, attrs, body string) string {
	t.Helper()
	path := writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "ai" {
  plugin = %q
  %s
  config {
%s
  }
}
pack "private.wophost.probe" { path = %q }
`, binary(t, "./plugins/aienvelope"), attrs, body, probePack(t)))
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "rules.json"), []byte(aiRules), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const localAI = `
    default_provider = "local"
    provider "local" {
      type  = "local"
      rules = file("rules.json")
    }`

// probeCall runs probe.call, which makes one ctx call from pack code.
func probeCall(t *testing.T, h *host.Host, method string, payload string) (json.RawMessage, error) {
	t.Helper()
	in := fmt.Sprintf(`{"family":"aiEnvelope","method":%q,"payload":%s}`, method, payload)
	res, err := h.Run(context.Background(), "probe.call", json.RawMessage(in), host.RunOptions{Timeout: time.Minute})
	if err != nil {
		return nil, err
	}
	return res.Output, nil
}

type aiResult struct {
	EnvelopeID   string `json:"envelopeId"`
	EnvelopeType string `json:"envelopeType"`
	Status       string `json:"status"`
	Text         string `json:"text"`
	FinishReason string `json:"finishReason"`
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	TimedOut     bool   `json:"timedOut"`
	ToolCalls    []struct {
		ID, Name  string
		Arguments json.RawMessage
	} `json:"toolCalls"`
}

// decoder decodes call results for t; a method, so that a call's two
// results can be passed straight in.
type decoder struct{ t *testing.T }

func (d decoder) result(raw json.RawMessage, err error) aiResult {
	t := d.t
	t.Helper()
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	var e aiResult
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return e
}

// A pack node drives an agent loop on the local provider through the
// host: a tool call, then the answer once the tool result is in.
func TestAIEnvelopeAgentLoopFromAPackNode(t *testing.T) {
	h := startHost(t, aiConfig(t, localAI))
	first := decoder{t}.result(probeCall(t, h, "generate",
		`{"envelopeType":"agent.turn","userMessage":"What is the {{what}} in Paris?","variables":{"what":"weather"},"idempotencyKey":"loop-1"}`))
	if first.Status != "completed" || first.FinishReason != "tool_calls" || len(first.ToolCalls) != 1 ||
		first.ToolCalls[0].Name != "get_weather" || first.Provider != "local" || first.Model != "local-rules" {
		t.Fatalf("first turn %+v", first)
	}
	tc := first.ToolCalls[0]
	second := decoder{t}.result(probeCall(t, h, "generate", fmt.Sprintf(`{"envelopeType":"agent.turn","messages":[
		{"role":"user","content":"What is the weather in Paris?"},
		{"role":"assistant","content":"","toolCalls":[{"id":%q,"name":"get_weather","arguments":%s}]},
		{"role":"tool","toolCallId":%q,"content":"18C"}],"idempotencyKey":"loop-2"}`, tc.ID, tc.Arguments, tc.ID)))
	if second.Text != "The weather is fine." || second.FinishReason != "stop" {
		t.Fatalf("second turn %+v", second)
	}

	// Refusals keep their family codes on the way to pack code.
	_, err := probeCall(t, h, "generate", `{"envelopeType":"x","userMessage":"{{nope}}","idempotencyKey":"v-1"}`)
	if c := wop.CodeOf(err); c != "envelope_validation_failed" {
		t.Errorf("missing variable: %v", err)
	}
	_, err = probeCall(t, h, "generate", `{"envelopeType":"x","userMessage":"hi","idempotencyKey":"loop-1"}`)
	if c := wop.CodeOf(err); c != wop.CodeIdempotencyKeyMismatch {
		t.Errorf("reused key: %v", err)
	}

	// The real host binary reaches the same plugin the same way.
	cfg := aiConfig(t, localAI)
	res := runHost(t, `{"family":"aiEnvelope","method":"generate","payload":{"envelopeType":"cli","userMessage":"hello","idempotencyKey":"cli-1"}}`,
		"--config", cfg, "--json", "run", "probe.call", "--input", "-")
	if res.code != 0 || !strings.Contains(res.stdout, `"status":"completed"`) || !strings.Contains(res.stdout, "not a language model") {
		t.Errorf("host run: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
}

// ctx.aiEnvelope.await exists only with the facet; and a pack that did
// not declare the facet may not call it even then.
func TestAIEnvelopeAwaitFacet(t *testing.T) {
	t.Run("not advertised", func(t *testing.T) {
		h := startHost(t, aiConfig(t, localAI))
		if facets := advertisedFacets(t, h); facets["await"] {
			t.Fatalf("await advertised without async: %v", facets)
		}
		// Unadvertised: refused as not provided (the operator may call any
		// family, so only advertisement stands in the way).
		_, err := h.Call(context.Background(), "aiEnvelope", "await", json.RawMessage(`{"envelopeId":"env_x","timeoutMs":10}`), host.RunOptions{})
		we := wop.AsError(err)
		if we == nil || we.Code != wop.CodeCapabilityNotProvided || we.Capability != "host.aiEnvelope.await" {
			t.Errorf("await without the facet: %v", err)
		}
		// From a pack that did not declare the facet: not declared, which
		// the host checks first.
		if _, err := probeCall(t, h, "await", `{"envelopeId":"env_x","timeoutMs":10}`); wop.CodeOf(err) != wop.CodeCapabilityNotDeclared {
			t.Errorf("undeclared await without the facet: %v", err)
		}
		// An async generate needs the facet like await: refused the same
		// ways, before the plugin sees it.
		_, err = probeCall(t, h, "generate", `{"envelopeType":"x","userMessage":"hi","idempotencyKey":"a-1","async":true}`)
		if c := wop.CodeOf(err); c != wop.CodeCapabilityNotDeclared || !strings.Contains(err.Error(), "aiEnvelope.await") {
			t.Errorf("undeclared async without the facet: %v", err)
		}
		_, err = h.Call(context.Background(), "aiEnvelope", "generate", json.RawMessage(`{"envelopeType":"x","userMessage":"hi","idempotencyKey":"a-2","async":true}`), host.RunOptions{})
		if we := wop.AsError(err); we == nil || we.Code != wop.CodeCapabilityNotProvided || we.Capability != "host.aiEnvelope.await" {
			t.Errorf("async without the facet: %v", err)
		}
	})
	t.Run("advertised", func(t *testing.T) {
		h := startHost(t, aiConfig(t, localAI+"\n    async {\n      enabled = true\n    }"))
		if facets := advertisedFacets(t, h); !facets["await"] {
			t.Fatalf("await not advertised with async on: %v", facets)
		}
		// The probe pack does not declare aiEnvelope.await: it may start
		// no job it could not await.
		if _, err := probeCall(t, h, "generate", `{"envelopeType":"bg","userMessage":"hello","idempotencyKey":"bg-0","async":true}`); wop.CodeOf(err) != wop.CodeCapabilityNotDeclared {
			t.Errorf("undeclared async generate: %v", err)
		}
		pending := decoder{t}.result(h.Call(context.Background(), "aiEnvelope", "generate",
			json.RawMessage(`{"envelopeType":"bg","userMessage":"hello","idempotencyKey":"bg-1","async":true}`), host.RunOptions{}))
		if pending.Status != "pending" || pending.EnvelopeID == "" {
			t.Fatalf("async generate %+v", pending)
		}
		_, err := probeCall(t, h, "await", fmt.Sprintf(`{"envelopeId":%q,"timeoutMs":10}`, pending.EnvelopeID))
		if c := wop.CodeOf(err); c != wop.CodeCapabilityNotDeclared {
			t.Errorf("undeclared await: %v", err)
		}
		// The operator may call any advertised method.
		done := decoder{t}.result(h.Call(context.Background(), "aiEnvelope", "await",
			json.RawMessage(fmt.Sprintf(`{"envelopeId":%q,"timeoutMs":30000}`, pending.EnvelopeID)), host.RunOptions{Timeout: time.Minute}))
		if done.Status != "completed" || done.EnvelopeID != pending.EnvelopeID || done.EnvelopeType != "bg" {
			t.Errorf("await %+v", done)
		}
	})
}

// advertisedFacets reads the aiEnvelope facets from the host's discovery
// document, as a client of the host would see them.
func advertisedFacets(t *testing.T, h *host.Host) map[string]bool {
	t.Helper()
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(h.Registry().Document(), &doc); err != nil {
		t.Fatal(err)
	}
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(doc["aiEnvelope"], &rec); err != nil || rec == nil {
		t.Fatalf("aiEnvelope is not advertised: %s", h.Registry().Document())
	}
	// await, when advertised, is the boolean OpenWOP publishes.
	validDiscovery(t, h.Registry().Document())
	out := map[string]bool{}
	for k := range rec {
		out[k] = true
	}
	return out
}

// chatServer is an OpenAI-compatible endpoint that counts calls and, when
// gated, holds each answer until the gate opens.
type chatServer struct {
	*httptest.Server
	mu    sync.Mutex
	calls int
	gate  chan struct{}
}

func newChatServer(t *testing.T, gated bool) *chatServer {
	s := &chatServer{}
	if gated {
		s.gate = make(chan struct{})
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.calls++
		s.mu.Unlock()
		if s.gate != nil {
			select {
			case <-s.gate:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1795947243,"model":"fixture-model",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"answer from the server"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *chatServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// pluginPID finds the child process of this test running binary.
func pluginPID(t *testing.T, binary string) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || exe != binary {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(os.Getpid()) && fields[0] != "Z" {
			return pid
		}
	}
	t.Fatalf("no running %s child process", binary)
	return 0
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A recorded envelope and an accepted async job both survive kill -9 of
// the plugin: the host restarts it, the recorded envelope is answered
// without calling the provider again, and the job is finished.
func TestAIEnvelopeSurvivesKill9(t *testing.T) {
	fast, slow := newChatServer(t, false), newChatServer(t, true)
	cfg := aiConfig(t, fmt.Sprintf(`
    default_provider = "fast"
    async {
      enabled = true
    }
    retry {
      initial_backoff = "10ms"
    }
    provider "fast" {
      type     = "openai"
      base_url = "%s/v1"
      model    = "fixture-model"
    }
    provider "slow" {
      type     = "openai"
      base_url = "%s/v1"
      model    = "fixture-model"
    }`, fast.URL, slow.URL))
	h := startHost(t, cfg)
	const syncReq = `{"envelopeType":"answer","userMessage":"hello","idempotencyKey":"kill-sync"}`
	first := decoder{t}.result(probeCall(t, h, "generate", syncReq))
	if first.Text != "answer from the server" || fast.count() != 1 {
		t.Fatalf("first generate %+v, provider calls %d", first, fast.count())
	}
	// The operator starts the job: the probe pack may not, since it does
	// not declare aiEnvelope.await.
	pending := decoder{t}.result(h.Call(context.Background(), "aiEnvelope", "generate",
		json.RawMessage(`{"envelopeType":"bg","provider":"slow","userMessage":"take your time","idempotencyKey":"kill-async","async":true}`), host.RunOptions{}))
	if pending.Status != "pending" {
		t.Fatalf("async generate %+v", pending)
	}
	waitUntil(t, "the job to reach the provider", func() bool { return slow.count() == 1 })

	pid := pluginPID(t, binary(t, "./plugins/aienvelope"))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the plugin to be restarted", func() bool {
		for _, r := range h.Registry().Records() {
			if r.Name == "ai" && r.State == "ready" && r.Restarts >= 1 {
				return true
			}
		}
		return false
	})
	close(slow.gate)

	done := decoder{t}.result(h.Call(context.Background(), "aiEnvelope", "await",
		json.RawMessage(fmt.Sprintf(`{"envelopeId":%q,"timeoutMs":30000}`, pending.EnvelopeID)), host.RunOptions{Timeout: time.Minute}))
	if done.Status != "completed" || done.Text != "answer from the server" || done.EnvelopeID != pending.EnvelopeID {
		t.Errorf("await after the restart: %+v", done)
	}
	if n := slow.count(); n != 2 {
		t.Errorf("slow provider calls %d, want 2 (the one cut by the kill, the resumed one)", n)
	}
	again := decoder{t}.result(probeCall(t, h, "generate", syncReq))
	if again.EnvelopeID != first.EnvelopeID || fast.count() != 1 {
		t.Errorf("after the restart: aiResult %s (want %s), provider calls %d (want 1)", again.EnvelopeID, first.EnvelopeID, fast.count())
	}
}

// Two hosts on one state directory: the second one's aiEnvelope plugin
// cannot open the store the first one's plugin holds, and fails saying
// which process holds it, instead of recovering (and so releasing) the
// envelope the first one is still completing. Once the first host has
// stopped, a new one opens the store and answers from it.
func TestAIEnvelopeStoreAdmitsOneProcess(t *testing.T) {
	slow := newChatServer(t, true)
	cfg := aiConfig(t, fmt.Sprintf(`
    default_provider = "slow"
    provider "slow" {
      type     = "openai"
      base_url = "%s/v1"
      model    = "fixture-model"
    }`, slow.URL))
	first := startHost(t, cfg)
	const req = `{"envelopeType":"answer","userMessage":"hello","idempotencyKey":"one-owner"}`
	inFlight := make(chan aiResult, 1)
	go func() {
		raw, err := probeCall(t, first, "generate", req)
		var res aiResult
		if err == nil {
			err = json.Unmarshal(raw, &res)
		}
		if err != nil {
			res.Status = err.Error()
		}
		inFlight <- res
	}()
	waitUntil(t, "the call to reach the provider", func() bool { return slow.count() == 1 })
	holder := pluginPID(t, binary(t, "./plugins/aienvelope"))

	loaded, ldr, diags := config.Load(cfg)
	if diags.HasErrors() {
		t.Fatal(config.FormatDiagnostics(diags))
	}
	second := host.New(loaded, ldr, hclog.NewNullLogger(), "test")
	start := time.Now()
	rep := second.Start(context.Background())
	second.Close()
	var lastError string
	for _, r := range second.Registry().Records() {
		if r.Name == "ai" {
			lastError = r.LastError
		}
	}
	for _, want := range []string{"in use by another process", fmt.Sprintf("process %d holds", holder), "aienvelope.db.lock"} {
		if !strings.Contains(lastError, want) {
			t.Errorf("the second host's ai capability: %q does not say %q\n%s", lastError, want, config.FormatDiagnostics(rep.All()))
		}
	}
	t.Logf("the second host gave up on the store after %s", time.Since(start).Round(time.Millisecond))

	close(slow.gate)
	res := <-inFlight
	if res.Status != "completed" {
		t.Fatalf("the first host's call: %+v", res)
	}
	if again := (decoder{t}).result(probeCall(t, first, "generate", req)); again.EnvelopeID != res.EnvelopeID || slow.count() != 1 {
		t.Errorf("replay on the first host: %s (want %s), provider calls %d (want 1)", again.EnvelopeID, res.EnvelopeID, slow.count())
	}

	first.Close()
	third := startHost(t, cfg)
	if again := (decoder{t}).result(probeCall(t, third, "generate", req)); again.EnvelopeID != res.EnvelopeID || slow.count() != 1 {
		t.Errorf("replay on a host started after the first stopped: %s (want %s), provider calls %d (want 1)", again.EnvelopeID, res.EnvelopeID, slow.count())
	}
}
