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
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/wop"
	"github.com/wophost/wophost/test/testbin"
)

// agentRules script the local provider for the agents of agentManifests.
// Each agent's system prompt is "You are agent <id>.", so a rule on the
// system prompt speaks for one agent; rules on tool results come first,
// because they answer the turn after a tool call.
const agentRules = `{"rules":[
  {"on":"tool","contains":"not available to this agent","text":"refused-locally"},
  {"on":"system","contains":"You are agent looper.","toolCalls":[{"name":"tools__add","arguments":{"a":1,"b":1}}]},
  {"on":"tool","contains":"\"sum\":5","text":"math-done: 2 + 3 = 5"},
  {"on":"system","contains":"You are agent math.","toolCalls":[{"name":"tools__add","arguments":{"a":2,"b":3}}]},
  {"on":"system","contains":"You are agent sneaky.","toolCalls":[{"name":"tools__fail","arguments":{}}]},
  {"on":"system","contains":"You are agent writer.","text":"a poem"},
  {"on":"system","contains":"You are agent spender.","text":"an answer longer than the five tokens its budget allows"},
  {"on":"system","contains":"You are agent voter-a.","json":{"vote":"yes","rationale":"scripted"}},
  {"on":"system","contains":"You are agent voter-b.","json":{"vote":" YES ","rationale":"scripted"}},
  {"on":"system","contains":"You are agent voter-c.","json":{"vote":"no","rationale":"scripted"}}
]}`

// agentDef is one agent of a test pack.
type agentDef struct {
	ID, Description string
	Allow           []string
	Limits          string // JSON object, or ""
	Skills          string // JSON array, or ""
	// PromptRef, when set, replaces the published pin of the agent's
	// prompt (to test refusals).
	PromptRef string
}

var testAgents = []agentDef{
	{ID: "math", Description: "Adds numbers with a calculator tool.", Allow: []string{"tools/add"},
		Skills: `[{"id":"arithmetic","description":"adds numbers","tags":["add","sum","numbers"]}]`},
	{ID: "writer", Description: "Writes prose and poems.", Skills: `[{"id":"poetry","tags":["poem","prose"]}]`},
	{ID: "looper", Description: "Calls a tool forever.", Allow: []string{"tools/add"}, Limits: `{"turns":2}`},
	{ID: "spender", Description: "Talks too much.", Limits: `{"tokenBudget":5}`},
	{ID: "sneaky", Description: "Asks for a tool it may not use.", Allow: []string{"tools/add"}},
	{ID: "voter-a", Description: "Votes."},
	{ID: "voter-b", Description: "Votes."},
	{ID: "voter-c", Description: "Votes."},
}

// agentEnv is a host config with aiEnvelope (local provider, agentRules
// unless a provider block is given), promptLibrary, mcp (the Go SDK test
// server as "tools"), the agent runtime, and a pack installing agents.
type agentEnv struct {
	dir, cfg, promptDir string
	pins                map[string]string
}

// newAgentEnv publishes one prompt per agent of defs and writes the config
// with the packs given as name → agents.
func newAgentEnv(t *testing.T, aiBody string, packs map[string][]agentDef) *agentEnv {
	t.Helper()
	e := &agentEnv{dir: t.TempDir(), pins: map[string]string{}}
	e.promptDir = filepath.Join(e.dir, "prompts-store")
	if err := os.WriteFile(filepath.Join(e.dir, "rules.json"), []byte(agentRules), 0o644); err != nil {
		t.Fatal(err)
	}
	if aiBody == "" {
		aiBody = localAI
	}
	var packBlocks strings.Builder
	names := make([]string, 0, len(packs))
	for name := range packs {
		names = append(names, name)
	}
	// Declaration order is the map's sorted order, for stable outcomes.
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(&packBlocks, "pack %q { path = %q }\n", name, e.agentPack(t, name, packs[name]))
	}
	e.cfg = filepath.Join(e.dir, "host.hcl")
	cfg := fmt.Sprintf(`
host {
  plugin_dir = %q
  state_dir  = %q
}
capability "ai" {
  plugin = %q
  config {
%s
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
    server "tools" { command = [%q] }
  }
}
capability "rt" {
  plugin = %q
}
%s`, bin.dir, filepath.Join(e.dir, "state"), binary(t, "./plugins/aienvelope"), aiBody,
		binary(t, "./plugins/promptlib"), e.promptDir, binary(t, "./plugins/mcp"), binary(t, "./test/mcpservers/gosdk"),
		binary(t, "./plugins/agentrt"), packBlocks.String())
	if err := os.WriteFile(e.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// Publish every prompt the packs pin, before any host loads them.
	var files []string
	for _, name := range names {
		for _, a := range packs[name] {
			files = append(files, e.promptFile(t, a.ID))
		}
	}
	if len(files) > 0 {
		res := runHost(t, "", append([]string{"--config", e.cfg, "prompts", "publish"}, files...)...)
		if res.code != 0 {
			t.Fatalf("publish prompts: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
	}
	return e
}

// promptFile writes the system prompt of agent id and records its pin.
func (e *agentEnv) promptFile(t *testing.T, id string) string {
	t.Helper()
	path := filepath.Join(e.dir, "prompt-"+id+".prompt")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	raw := fmt.Sprintf("---\nname: t/%s\nversion: 1\n---\nYou are agent %s.\n", id, id)
	if err := os.WriteFile(path, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	e.pins[id] = fmt.Sprintf("t/%s@1#%s", id, promptlibrary.DigestOf([]byte(raw)))
	return path
}

// agentPack lays out the agentpack binary with a pack.json listing defs.
func (e *agentEnv) agentPack(t *testing.T, name string, defs []agentDef) string {
	t.Helper()
	dir := filepath.Join(e.dir, "pack-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var agents []string
	for _, a := range defs {
		e.promptFile(t, a.ID)
		ref := e.pins[a.ID]
		if a.PromptRef != "" {
			ref = a.PromptRef
		}
		allow, _ := json.Marshal(append([]string{}, a.Allow...))
		m := fmt.Sprintf(`{"id":%q,"name":%q,"description":%q,"systemPromptRef":%q,"toolAllowlist":%s`, a.ID, a.ID, a.Description, ref, allow)
		if a.Limits != "" {
			m += `,"limits":` + a.Limits
		}
		if a.Skills != "" {
			m += `,"skills":` + a.Skills
		}
		agents = append(agents, m+"}")
	}
	manifest := fmt.Sprintf(`{"name":%q,"version":"1.0.0","kind":"node","engines":{"openwop":">=2.0 <3.0.0"},"runtime":{"language":"go","entry":"agentpack"},
  "peerDependencies":{"agentRuntime":"required","mcp":"optional"},
  "agents":[%s]}`, name, strings.Join(agents, ",\n"))
	if err := os.WriteFile(filepath.Join(dir, "pack.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	exe, err := os.ReadFile(binary(t, "./test/plugins/agentpack"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agentpack"), exe, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// agentCall makes one agentRuntime call as the operator.
func agentCall(t *testing.T, h *host.Host, method string, req any, res any) error {
	t.Helper()
	payload, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Call(context.Background(), agentruntime.Family, method, payload, host.RunOptions{Timeout: time.Minute})
	if err != nil {
		return err
	}
	if res != nil {
		if err := json.Unmarshal(out, res); err != nil {
			t.Fatalf("%s result %s: %v", method, out, err)
		}
	}
	return nil
}

func spawn(t *testing.T, h *host.Host, manifestID string) string {
	t.Helper()
	var res agentruntime.SpawnResult
	if err := agentCall(t, h, agentruntime.MethodSpawn, agentruntime.SpawnRequest{ManifestID: manifestID, IdempotencyKey: "spawn-" + manifestID}, &res); err != nil {
		t.Fatalf("spawn %s: %v", manifestID, err)
	}
	if res.AgentInstanceID == "" || !strings.HasPrefix(res.ManifestDigest, "sha256:") {
		t.Fatalf("spawn %s: %+v", manifestID, res)
	}
	return res.AgentInstanceID
}

func wantCode(t *testing.T, err error, code string) *wop.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("succeeded; want %s", code)
	}
	we := wop.AsError(err)
	if we.Code != code {
		t.Fatalf("error %+v; want code %s", we, code)
	}
	return we
}

// limitOf reads details.limit of an agent_budget_exceeded error.
func limitOf(we *wop.Error) string {
	var d struct {
		Limit string `json:"limit"`
	}
	_ = json.Unmarshal(we.Details, &d)
	return d.Limit
}

// One host: install, spawn, delegation choices, consensus outcomes, the
// allowlist refused in the plugin, and budget and turn exhaustion.
func TestAgentsThroughTheHost(t *testing.T) {
	e := newAgentEnv(t, "", map[string][]agentDef{"private.test.agents": testAgents})
	a := &agentsHost{h: startHost(t, e.cfg), e: e, ids: map[string]string{}}

	t.Run("the registry lists every installed agent with its pack and digests", a.registry)
	if !t.Run("every installed agent spawns", a.spawnAll) {
		t.FailNow()
	}
	t.Run("spawn with the same key answers the same instance", a.spawnAgain)
	t.Run("spawn of an unknown manifest is agent_not_found", a.spawnUnknown)
	t.Run("an inline manifest gets the install checks", a.spawnInlineRefused)
	t.Run("a valid inline agent runs under the manifest it was spawned with", a.spawnInlineRuns)
	t.Run("best-match picks the agent whose skills fit the task", a.delegateBestMatch)
	t.Run("a sole candidate under the threshold escalates", a.delegateEscalates)
	t.Run("load-balanced picks the agent with the emptier mailbox", a.delegateLoadBalanced)
	t.Run("a tool outside the allowlist is refused in the plugin", a.allowlistRefused)
	t.Run("an agent that keeps calling tools runs out of turns", a.turnsExhausted)
	t.Run("an agent that keeps talking runs out of token budget", a.tokensExhausted)
	t.Run("majority decides on two votes of three", a.consensusMajority)
	t.Run("a split unanimous vote does not converge", a.consensusSplit)
	t.Run("a quorum met early asks no more voters", a.consensusQuorum)
}

// agentsHost is a host serving testAgents and the instances spawned of
// them, by manifest id.
type agentsHost struct {
	h   *host.Host
	e   *agentEnv
	ids map[string]string
}

func (a *agentsHost) registry(t *testing.T) {
	list := a.h.Agents()
	if len(list) != len(testAgents) {
		t.Fatalf("registry holds %d agents, want %d", len(list), len(testAgents))
	}
	for _, ag := range list {
		if ag.Pack != "private.test.agents" || ag.SystemPrompt.Digest == "" || !strings.HasPrefix(ag.Digest, "sha256:") {
			t.Errorf("entry %+v", ag)
		}
	}
	for _, p := range a.h.Packs() {
		if p.Name == "private.test.agents" && len(p.Agents) != len(testAgents) {
			t.Errorf("pack lists agents %v", p.Agents)
		}
	}
}

func (a *agentsHost) spawnAll(t *testing.T) {
	for _, ag := range testAgents {
		a.ids[ag.ID] = spawn(t, a.h, ag.ID)
	}
}

func (a *agentsHost) spawnAgain(t *testing.T) {
	if again := spawn(t, a.h, "math"); again != a.ids["math"] {
		t.Errorf("spawn with the same key: %s, want %s", again, a.ids["math"])
	}
}

func (a *agentsHost) spawnUnknown(t *testing.T) {
	err := agentCall(t, a.h, agentruntime.MethodSpawn, agentruntime.SpawnRequest{ManifestID: "nobody", IdempotencyKey: "k"}, nil)
	if we := wantCode(t, err, agentruntime.CodeAgentNotFound); we.Capability != agentruntime.CapabilitySpawn {
		t.Errorf("capability %q", we.Capability)
	}
}

// spawnInlineRefused spawns inline manifests that fail the install checks:
// a tool nobody serves, a prompt nobody published. Each refusal names the
// field.
func (a *agentsHost) spawnInlineRefused(t *testing.T) {
	bad := json.RawMessage(fmt.Sprintf(`{"id":"inline","name":"i","description":"d","systemPromptRef":%q,"toolAllowlist":["nowhere/add"]}`, a.e.pins["math"]))
	err := agentCall(t, a.h, agentruntime.MethodSpawn, agentruntime.SpawnRequest{Manifest: bad, IdempotencyKey: "inline-bad"}, nil)
	if we := wantCode(t, err, wop.CodeValidation); !strings.Contains(we.Message, "/manifest/toolAllowlist/0") {
		t.Errorf("inline refusal does not name the field: %s", we.Message)
	}
	unpublished := json.RawMessage(`{"id":"inline","name":"i","description":"d","systemPromptRef":"t/absent@1","toolAllowlist":[]}`)
	err = agentCall(t, a.h, agentruntime.MethodSpawn, agentruntime.SpawnRequest{Manifest: unpublished, IdempotencyKey: "inline-absent"}, nil)
	if we := wantCode(t, err, wop.CodeValidation); !strings.Contains(we.Message, "/manifest/systemPromptRef") {
		t.Errorf("inline refusal does not name the field: %s", we.Message)
	}
}

// spawnInlineRuns spawns a valid inline agent; its tool calls are checked
// by the host against the manifest it was spawned with.
func (a *agentsHost) spawnInlineRuns(t *testing.T) {
	good := json.RawMessage(fmt.Sprintf(`{"id":"inline-math","name":"i","description":"adds","systemPromptRef":%q,"toolAllowlist":["tools/add"]}`, a.e.pins["math"]))
	var res agentruntime.SpawnResult
	if err := agentCall(t, a.h, agentruntime.MethodSpawn, agentruntime.SpawnRequest{Manifest: good, IdempotencyKey: "inline-good"}, &res); err != nil {
		t.Fatalf("inline spawn: %v", err)
	}
	var d agentruntime.DelegateResult
	if err := agentCall(t, a.h, agentruntime.MethodDelegate, agentruntime.DelegateRequest{Task: json.RawMessage(`"add 2 and 3"`), Agents: []string{res.AgentInstanceID}}, &d); err != nil {
		t.Fatalf("delegate to the inline agent: %v", err)
	}
	if string(d.Output) != `"math-done: 2 + 3 = 5"` {
		t.Errorf("inline agent output %s", d.Output)
	}
}

func (a *agentsHost) delegate(t *testing.T, req agentruntime.DelegateRequest) agentruntime.DelegateResult {
	t.Helper()
	var res agentruntime.DelegateResult
	if err := agentCall(t, a.h, agentruntime.MethodDelegate, req, &res); err != nil {
		t.Fatalf("delegate %s: %v", req.Task, err)
	}
	return res
}

// delegateBestMatch: the task's terms "add" and "numbers" are math's skill
// tags; the loop calls tools/add on the MCP server, then answers from the
// tool's result. A poem goes to the writer.
func (a *agentsHost) delegateBestMatch(t *testing.T) {
	ids := a.ids
	res := a.delegate(t, agentruntime.DelegateRequest{Task: json.RawMessage(`"add the numbers 2 and 3"`), Agents: []string{ids["writer"], ids["math"]}})
	if res.SelectedAgentID != ids["math"] || res.Status != agentruntime.StatusCompleted || string(res.Output) != `"math-done: 2 + 3 = 5"` {
		t.Errorf("best-match: %+v output %s", res, res.Output)
	}
	res = a.delegate(t, agentruntime.DelegateRequest{Task: json.RawMessage(`"write a poem"`), Agents: []string{ids["math"], ids["writer"]}})
	if res.SelectedAgentID != ids["writer"] || string(res.Output) != `"a poem"` {
		t.Errorf("best-match poem: %+v output %s", res, res.Output)
	}
}

// delegateEscalates: math is the only candidate and scores 0 for a poem.
func (a *agentsHost) delegateEscalates(t *testing.T) {
	threshold := 0.5
	res := a.delegate(t, agentruntime.DelegateRequest{Task: json.RawMessage(`"write a poem"`), Agents: []string{a.ids["math"]}, EscalationThreshold: &threshold})
	if res.Status != agentruntime.StatusEscalated || !res.Escalated || res.SelectedAgentID != a.ids["math"] || len(res.Output) != 0 {
		t.Errorf("escalation: %+v", res)
	}
}

// delegateLoadBalanced: both idle, the first listed; once writer has a
// message waiting in its mailbox, math.
func (a *agentsHost) delegateLoadBalanced(t *testing.T) {
	ids := a.ids
	lb := agentruntime.DelegateRequest{Task: json.RawMessage(`"add 2 and 3"`), Agents: []string{ids["writer"], ids["math"]}, Strategy: agentruntime.StrategyLoadBalanced}
	if res := a.delegate(t, lb); res.SelectedAgentID != ids["writer"] {
		t.Errorf("load-balanced, both idle: %s, want writer", res.SelectedAgentID)
	}
	if err := agentCall(t, a.h, agentruntime.MethodMessageSend, agentruntime.MessageSendRequest{
		FromAgentID: ids["math"], ToAgentID: ids["writer"], Channel: "notes", Content: json.RawMessage(`"later"`), IdempotencyKey: "lb-1",
	}, nil); err != nil {
		t.Fatal(err)
	}
	if res := a.delegate(t, lb); res.SelectedAgentID != ids["math"] || string(res.Output) != `"math-done: 2 + 3 = 5"` {
		t.Errorf("load-balanced, writer busy: %+v output %s", res, res.Output)
	}
}

// allowlistRefused: sneaky's model asks for tools__fail, which its
// allowlist does not offer: the loop answers the model with an error
// result without calling mcp, and the model's next turn sees it.
func (a *agentsHost) allowlistRefused(t *testing.T) {
	res := a.delegate(t, agentruntime.DelegateRequest{Task: json.RawMessage(`"do it"`), Agents: []string{a.ids["sneaky"]}})
	if string(res.Output) != `"refused-locally"` {
		t.Errorf("sneaky output %s, want the scripted answer to the refusal", res.Output)
	}
}

func (a *agentsHost) turnsExhausted(t *testing.T) {
	err := agentCall(t, a.h, agentruntime.MethodDelegate, agentruntime.DelegateRequest{Task: json.RawMessage(`"loop"`), Agents: []string{a.ids["looper"]}}, nil)
	we := wantCode(t, err, agentruntime.CodeAgentBudgetExceeded)
	if limitOf(we) != "turns" {
		t.Errorf("looper details %v, want limit turns", we.Details)
	}
}

func (a *agentsHost) tokensExhausted(t *testing.T) {
	err := agentCall(t, a.h, agentruntime.MethodDelegate, agentruntime.DelegateRequest{Task: json.RawMessage(`"talk"`), Agents: []string{a.ids["spender"]}}, nil)
	we := wantCode(t, err, agentruntime.CodeAgentBudgetExceeded)
	if limitOf(we) != "tokenBudget" {
		t.Errorf("spender details %v, want limit tokenBudget", we.Details)
	}
}

func (a *agentsHost) consensus(t *testing.T, req agentruntime.ConsensusRequest) agentruntime.ConsensusResult {
	t.Helper()
	req.Proposal = json.RawMessage(`"ship it?"`)
	var res agentruntime.ConsensusResult
	if err := agentCall(t, a.h, agentruntime.MethodConsensus, req, &res); err != nil {
		t.Fatalf("consensus: %v", err)
	}
	return res
}

// votes lists a consensus result's ballots as "participant=vote".
func votes(res agentruntime.ConsensusResult) string {
	var parts []string
	for _, b := range res.Ballots {
		parts = append(parts, fmt.Sprintf("%d=%s", b.Participant, b.Vote))
	}
	return strings.Join(parts, " ")
}

// voters are the three voting agents, a, b and c.
func (a *agentsHost) voters() []string {
	return []string{a.ids["voter-a"], a.ids["voter-b"], a.ids["voter-c"]}
}

func (a *agentsHost) consensusMajority(t *testing.T) {
	res := a.consensus(t, agentruntime.ConsensusRequest{Participants: a.voters(), Strategy: agentruntime.StrategyMajority})
	if !res.Converged || res.Rounds != 1 || string(res.Decision) != `"yes"` || votes(res) != `0="yes" 1=" YES " 2="no"` {
		t.Errorf("majority: %+v (%s)", res, votes(res))
	}
	if res.Agreement < 0.66 || res.Agreement > 0.67 {
		t.Errorf("majority agreement %v, want 2/3", res.Agreement)
	}
}

// consensusSplit: a and c disagree, and a debate round changes nothing.
func (a *agentsHost) consensusSplit(t *testing.T) {
	res := a.consensus(t, agentruntime.ConsensusRequest{Participants: []string{a.ids["voter-a"], a.ids["voter-c"]}, Strategy: agentruntime.StrategyUnanimous, MaxRounds: 2})
	if res.Converged || res.Rounds != 2 || len(res.Decision) != 0 || res.Agreement != 0.5 || votes(res) != `0="yes" 1="no"` {
		t.Errorf("split: %+v (%s)", res, votes(res))
	}
}

// consensusQuorum: a quorum of 2 out of 3 is met by a and b: c is never
// asked.
func (a *agentsHost) consensusQuorum(t *testing.T) {
	threshold := 0.5
	res := a.consensus(t, agentruntime.ConsensusRequest{Participants: a.voters(), Strategy: agentruntime.StrategyQuorum, Threshold: &threshold})
	if !res.Converged || res.Rounds != 1 || len(res.Ballots) != 2 || votes(res) != `0="yes" 1=" YES "` {
		t.Errorf("quorum met early: %+v (%s)", res, votes(res))
	}
}

// capture is an OpenAI-compatible endpoint that records each request body
// and answers "ok".
type capture struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newCapture(t *testing.T) *capture {
	c := &capture{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.bodies = append(c.bodies, string(b))
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1795947243,"model":"fixture-model",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *capture) last(t *testing.T) string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bodies) == 0 {
		t.Fatal("the provider was not called")
	}
	return c.bodies[len(c.bodies)-1]
}

// Mailboxes: deduplicated by key, delivered oldest first, and a message
// accepted before kill -9 of the runtime is delivered once the host has
// restarted it. The provider records what the agent was shown.
func TestAgentMailboxAcrossKill9(t *testing.T) {
	srv := newCapture(t)
	e := newAgentEnv(t, fmt.Sprintf(`
    default_provider = "chat"
    provider "chat" {
      type     = "openai"
      base_url = "%s/v1"
      model    = "fixture-model"
    }`, srv.URL), map[string][]agentDef{"private.test.mailbox": {{ID: "listener", Description: "Reads its mail."}}})
	h := startHost(t, e.cfg)
	id := spawn(t, h, "listener")

	send := func(from, key, content string) (agentruntime.MessageSendResult, error) {
		var res agentruntime.MessageSendResult
		err := agentCall(t, h, agentruntime.MethodMessageSend, agentruntime.MessageSendRequest{
			FromAgentID: from, ToAgentID: id, Channel: "inbox", Content: json.RawMessage(content), IdempotencyKey: key,
		}, &res)
		return res, err
	}
	first, err := send("alice", "k1", `"m-one"`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := send("bob", "k2", `"m-two"`); err != nil {
		t.Fatal(err)
	}
	if _, err := send("alice", "k3", `"m-three"`); err != nil {
		t.Fatal(err)
	}
	// The same key and content: the same message, not a second one.
	again, err := send("alice", "k1", `"m-one"`)
	if err != nil || again.MessageID != first.MessageID {
		t.Fatalf("resend: %+v %v, want message %s", again, err, first.MessageID)
	}
	_, err = send("alice", "k1", `"something else"`)
	wantCode(t, err, wop.CodeIdempotencyKeyMismatch)

	pid := pluginPID(t, binary(t, "./plugins/agentrt"))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the agent runtime to be restarted", func() bool {
		for _, r := range h.Registry().Records() {
			if r.Name == "rt" && r.State == "ready" && r.Restarts >= 1 {
				return true
			}
		}
		return false
	})
	if !h.Registry().Has(agentruntime.Family, "") || !h.Registry().Has(agentruntime.FamilyAgents, agentruntime.FacetManifestRuntime) {
		t.Fatalf("not advertised after the restart: %s", h.Registry().Document())
	}

	var res agentruntime.DelegateResult
	if err := agentCall(t, h, agentruntime.MethodDelegate, agentruntime.DelegateRequest{Task: json.RawMessage(`"read your mail"`), Agents: []string{id}}, &res); err != nil {
		t.Fatalf("delegate after the restart: %v", err)
	}
	body := srv.last(t)
	at := func(s string) int {
		i := strings.Index(body, s)
		if i < 0 {
			t.Fatalf("the agent was not shown %q:\n%s", s, body)
		}
		return i
	}
	if !(at("m-one") < at("m-two") && at("m-two") < at("m-three") && at("m-three") < at("read your mail")) {
		t.Errorf("mailbox not delivered oldest first, before the task:\n%s", body)
	}
	if n := strings.Count(body, "m-one"); n != 1 {
		t.Errorf("m-one shown %d times, want once", n)
	}
	// Delivered messages are acknowledged: the next task comes alone.
	if err := agentCall(t, h, agentruntime.MethodDelegate, agentruntime.DelegateRequest{Task: json.RawMessage(`"anything new?"`), Agents: []string{id}}, &res); err != nil {
		t.Fatal(err)
	}
	if body := srv.last(t); strings.Contains(body, "m-one") || !strings.Contains(body, "anything new?") {
		t.Errorf("second task saw old mail:\n%s", body)
	}
}

// A pack whose agents do not resolve is refused at install, naming the
// field; the other packs load, and only their agents are listed.
func TestAgentPackRefusals(t *testing.T) {
	e := newAgentEnv(t, "", map[string][]agentDef{
		"private.test.good":      {{ID: "good", Description: "Fine."}},
		"private.test.unpinned":  {{ID: "unpinned", Description: "Bare name.", PromptRef: "t/unpinned"}},
		"private.test.label":     {{ID: "label", Description: "Moving label.", PromptRef: "t/label@latest"}},
		"private.test.absent":    {{ID: "absent", Description: "Never published.", PromptRef: "t/absent@7"}},
		"private.test.noserver":  {{ID: "noserver", Description: "Unknown server.", Allow: []string{"tools/add", "nowhere/add"}}},
		"private.test.second":    {{ID: "good", Description: "Same id as private.test.good."}},
		"private.test.nohandoff": {{ID: "handoff", Description: "Hands off to nobody."}},
	})
	// The handoff target is checked against this pack and those declared
	// before it.
	rewrite := func(name, from, to string) {
		path := filepath.Join(e.dir, "pack-"+name, "pack.json")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(b), from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rewrite("private.test.nohandoff", `"toolAllowlist":[]`, `"toolAllowlist":[],"handoff":{"targets":["ghost"]}`)

	res := runHost(t, "", "--config", e.cfg, "--json", "packs")
	if res.code != 0 {
		t.Fatalf("packs: exit %d\n%s", res.code, res.stderr)
	}
	var packs []host.PackInfo
	if err := json.Unmarshal([]byte(res.stdout), &packs); err != nil {
		t.Fatalf("%v\n%s", err, res.stdout)
	}
	want := map[string]string{
		"private.test.good":      "",
		"private.test.unpinned":  "/agents/0/systemPromptRef",
		"private.test.label":     "/agents/0/systemPromptRef",
		"private.test.absent":    "/agents/0/systemPromptRef",
		"private.test.noserver":  "/agents/0/toolAllowlist/1",
		"private.test.second":    "/agents/0/id",
		"private.test.nohandoff": "/agents/0/handoff/targets/0",
	}
	for _, p := range packs {
		field, ok := want[p.Name]
		if !ok {
			continue
		}
		delete(want, p.Name)
		if field == "" {
			if p.State != host.PackReady || len(p.Agents) != 1 {
				t.Errorf("%s: %+v", p.Name, p)
			}
			continue
		}
		if p.State != host.PackRefused || !strings.Contains(p.Error, "pack_validation_failed") || !strings.Contains(p.Error, field) {
			t.Errorf("%s: state %s error %q; want refused naming %s", p.Name, p.State, p.Error, field)
		}
	}
	if len(want) > 0 {
		t.Errorf("packs not listed: %v", want)
	}
	res = runHost(t, "", "--config", e.cfg, "--json", "agents")
	var list []struct{ ID, Pack string }
	if err := json.Unmarshal([]byte(res.stdout), &list); err != nil || res.code != 0 {
		t.Fatalf("agents: exit %d %v\n%s%s", res.code, err, res.stdout, res.stderr)
	}
	if len(list) != 1 || list[0].ID != "good" || list[0].Pack != "private.test.good" {
		t.Errorf("registry %+v, want only good from private.test.good", list)
	}
	table := runHost(t, "", "--config", e.cfg, "agents")
	if table.code != 0 || !strings.Contains(table.stdout, "AGENT") || !strings.Contains(table.stdout, "t/good@1") {
		t.Errorf("agents table: exit %d\n%s", table.code, table.stdout)
	}

	// GET /v1/agents lists the same registry.
	raw, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	served := filepath.Join(e.dir, "serve.hcl")
	text := strings.Replace(string(raw), "host {\n", "host {\n  http { listen = \"127.0.0.1:0\" }\n", 1)
	if err := os.WriteFile(served, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startServe(t, served)
	r := request(t, "GET", d.base+"/v1/agents", "", nil)
	var listed []struct{ ID, Digest string }
	if r.status != 200 || json.Unmarshal([]byte(r.body), &listed) != nil || len(listed) != 1 || listed[0].ID != "good" || !strings.HasPrefix(listed[0].Digest, "sha256:") {
		t.Errorf("GET /v1/agents: %d %s", r.status, r.body)
	}
	d.stop(t, syscall.SIGTERM)
}

// agentRuntime and agents.manifestRuntime are advertised together, and
// neither without aiEnvelope.
func TestAgentRuntimeAdvertisement(t *testing.T) {
	withAI := writeConfig(t, fmt.Sprintf(`
host { plugin_dir = "BIN" }
capability "ai" {
  plugin = %q
  config { default_provider = "local" }
}
capability "rt" { plugin = %q }
`, binary(t, "./plugins/aienvelope"), binary(t, "./plugins/agentrt")))
	without := writeConfig(t, fmt.Sprintf(`
host { plugin_dir = "BIN" }
capability "rt" { plugin = %q }
`, binary(t, "./plugins/agentrt")))

	doc := func(cfg string) map[string]json.RawMessage {
		res := runHost(t, "", "--config", cfg, "--json", "capabilities")
		var d map[string]json.RawMessage
		if res.code != 0 || json.Unmarshal([]byte(res.stdout), &d) != nil {
			t.Fatalf("capabilities: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		validDiscovery(t, []byte(res.stdout))
		return d
	}
	d := doc(withAI)
	if d["agentRuntime"] == nil || d["agents"] == nil {
		t.Fatalf("with aiEnvelope: %v", d)
	}
	var agents map[string]json.RawMessage
	if err := json.Unmarshal(d["agents"], &agents); err != nil || string(agents["manifestRuntime"]) != `{"handoffValidation":true,"installScope":"host"}` {
		t.Errorf("agents record %s", d["agents"])
	}
	d = doc(without)
	if d["agentRuntime"] != nil || d["agents"] != nil {
		t.Errorf("without aiEnvelope: agentRuntime %s, agents %s", d["agentRuntime"], d["agents"])
	}
	res := runHost(t, "", "--config", without, "agents")
	if e := decodeRefusal(t, res); e.Error != "not_found" || e.Details["capability"] != "host.agents.manifestRuntime" {
		t.Errorf("host agents without the runtime: exit %d\n%s", res.code, res.stdout)
	}
}

// The demo: the council pack's two agents vote on the example proposal on
// the local provider with the example rules, offline. The maintainer's
// scripted first vote differs, so the vote takes a debate round.
func TestCouncilDemo(t *testing.T) {
	pack, err := bin.cache.Pack("examples/packs/council")
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf(`
host { plugin_dir = "BIN" }
capability "ai" {
  plugin = %q
  config {
    default_provider = "local"
    provider "local" {
      type  = "local"
      rules = file(%q)
    }
  }
}
capability "prompts" {
  plugin   = %q
  families = ["promptLibrary"]
  config { dir = %q }
}
capability "agents" { plugin = %q }
pack "community.wophost.council" { path = %q }
`, binary(t, "./plugins/aienvelope"), testbin.SourceDir("examples/aienvelope/rules.json"), binary(t, "./plugins/promptlib"),
		filepath.Join(t.TempDir(), "prompts"), binary(t, "./plugins/agentrt"), pack))
	res := runHost(t, "", "--config", cfg, "prompts", "publish",
		testbin.SourceDir("examples/prompts/council-reviewer.prompt"), testbin.SourceDir("examples/prompts/council-maintainer.prompt"))
	if res.code != 0 {
		t.Fatalf("publish: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = runHost(t, "", "--config", cfg, "--json", "run", "council.decide", "--input", testbin.SourceDir("examples/inputs/council-proposal.json"))
	if res.code != 0 {
		t.Fatalf("council.decide: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	var out agentruntime.ConsensusResult
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, res.stdout)
	}
	if !out.Converged || out.Rounds != 2 || string(out.Decision) != `"accept"` || len(out.Ballots) != 2 {
		t.Errorf("council: %s", res.stdout)
	}
	for _, b := range out.Ballots {
		if !strings.Contains(b.Rationale, "[local-rules]") {
			t.Errorf("ballot %d does not say it is scripted: %q", b.Participant, b.Rationale)
		}
	}
}

// A pack with agents on a host without agents.manifestRuntime loads
// degraded and says what it misses; its agents are not installed.
func TestAgentPackWithoutTheRuntimeIsDegraded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `{"name":"private.test.agentless","version":"1.0.0","kind":"node","engines":{"openwop":">=2.0 <3.0.0"},"runtime":{"language":"go","entry":"agentpack"},
  "peerDependencies":{"agentRuntime":"optional"},
  "agents":[{"id":"lonely","name":"Lonely","description":"has no runtime","systemPromptRef":"t/lonely@1","toolAllowlist":[]}]}`
	if err := os.WriteFile(filepath.Join(dir, "pack.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	exe, err := os.ReadFile(binary(t, "./test/plugins/agentpack"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agentpack"), exe, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf("host { plugin_dir = \"BIN\" }\npack \"private.test.agentless\" { path = %q }\n", dir))
	res := runHost(t, "", "--config", cfg, "--json", "packs")
	var packs []host.PackInfo
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &packs) != nil || len(packs) != 1 {
		t.Fatalf("packs: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if p := packs[0]; p.State != host.PackDegraded || !slices.Contains(p.Degraded, "agents.manifestRuntime") || len(p.Agents) != 0 {
		t.Fatalf("a pack with agents and no runtime: %+v", p)
	}
	if !strings.Contains(res.stderr, "agents not installed") {
		t.Errorf("no warning says the agents were not installed:\n%s", res.stderr)
	}
}
