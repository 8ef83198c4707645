package plugintest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// AgentRuntimeConfig says how to run the agentRuntime family checks.
type AgentRuntimeConfig struct {
	// Binary, Args, InProcess, Env and StartTimeout are as in Config.
	Binary       string
	Args         []string
	InProcess    *plugin.Plugin
	Env          []string
	StartTimeout time.Duration
	// Config is a configuration the plugin accepts.
	Config json.RawMessage
	// MailboxCapacity is the mailbox size Config sets. When positive, the
	// checks fill a mailbox and expect mailbox_full; zero skips that.
	MailboxCapacity int
}

// AgentRuntime starts cfg.Binary, configures it and checks that it serves
// agentRuntime as docs/contract.md §4.3 requires. The checks answer the plugin's
// host-service callbacks themselves: promptLibrary.get with a fixed
// prompt and aiEnvelope.generate with scripted answers, so no provider is
// involved. One subtest per rule:
//
//   - Advertised: the family is described with spawn, delegate, consensus
//     and messageSend, and needs aiEnvelope.
//   - Spawn: an inline manifest gives an instance id and the manifest's
//     digest (agentruntime.Manifest.Digest); the same key gives the same
//     instance; an invalid manifest is validation_error.
//   - Delegate: the agent whose skills match the task is selected, the
//     run went through aiEnvelope.generate on the host, and an unknown
//     agent is agent_not_found.
//   - Consensus: agreeing participants converge on their vote with ballots
//     in participant order; a split under unanimous does not converge.
//   - MessageSend: a resent key gives the same message id, an unknown
//     recipient is agent_not_found, and a full mailbox is mailbox_full,
//     retryable.
func AgentRuntime(t *testing.T, cfg AgentRuntimeConfig) {
	t.Helper()
	agentRuntimeRules(testingT{t}, cfg)
}

// agentRuntimeRules runs AgentRuntime's checks.
func agentRuntimeRules(t checkT, cfg AgentRuntimeConfig) {
	t.Helper()
	c := &agentRuntimeChecks{
		cfg:     cfg,
		host:    &agentHost{},
		writer:  agentCheckManifest("plugintest-writer", "Writes and edits prose.", "copy-editing", "prose"),
		analyst: agentCheckManifest("plugintest-analyst", "Reads numbers.", "spreadsheet-analysis", "statistics"),
	}
	c.p = start(t, Config{Binary: cfg.Binary, Args: cfg.Args, InProcess: cfg.InProcess, Config: cfg.Config, Env: cfg.Env, StartTimeout: cfg.StartTimeout, HostServices: c.host.serve})
	t.Run("Advertised", "Describe lists agentRuntime with spawn, delegate, consensus and messageSend, and it needs aiEnvelope.", c.advertised)
	c.p.configure(t, cfg.Config)
	t.Run("Spawn", "spawn gives an instance id and the manifest's digest; the same key gives the same instance; an invalid manifest is validation_error.", c.spawnChecks)
	// The checks below need both agents.
	if c.writerID == "" || c.analystID == "" {
		return
	}
	t.Run("Delegate", "delegate selects the agent whose skills match the task, runs it through aiEnvelope.generate on the host; an unknown agent is agent_not_found.", c.delegate)
	t.Run("Consensus", "Agreeing participants converge on their vote with ballots in participant order; a split under unanimous does not converge.", c.consensus)
	t.Run("MessageSend", "A resent key gives the same message id, an unknown recipient is agent_not_found, a full mailbox is mailbox_full, retryable.", c.messageSend)
}

// agentRuntimeChecks is one run of the agentRuntime checks: the plugin,
// the host answering its callbacks and the two agents spawned.
type agentRuntimeChecks struct {
	cfg             AgentRuntimeConfig
	p               *Plugin
	host            *agentHost
	writer, analyst *agentruntime.Manifest
	// writerID and analystID are the instances Spawn made.
	writerID, analystID string
}

func (c *agentRuntimeChecks) advertised(t checkT) {
	f := describedFamily(t, c.p, agentruntime.Family)
	for _, m := range []string{agentruntime.MethodSpawn, agentruntime.MethodDelegate, agentruntime.MethodConsensus, agentruntime.MethodMessageSend} {
		if !slices.Contains(f.Methods, m) {
			t.Errorf("%s lacks the method %s: %v", agentruntime.Family, m, f.Methods)
		}
	}
	if !slices.Contains(f.Needs, wop.FamilyAIEnvelope) {
		t.Errorf("%s does not need %s (needs %v): the host must not advertise it without a model", agentruntime.Family, wop.FamilyAIEnvelope, f.Needs)
	}
}

func (c *agentRuntimeChecks) call(t checkT, method string, req any) (json.RawMessage, error) {
	t.Helper()
	return c.p.invokeJSON(t, agentruntime.Family, method, req, wop.CallContext{RunID: "plugintest-run", Caller: "pack:plugintest", Deadline: time.Now().Add(rpcTimeout)})
}

func (c *agentRuntimeChecks) spawn(t checkT, key string, m *agentruntime.Manifest) *agentruntime.SpawnResult {
	t.Helper()
	raw, _ := json.Marshal(m)
	out, err := c.call(t, agentruntime.MethodSpawn, &agentruntime.SpawnRequest{Manifest: raw, IdempotencyKey: key})
	if err != nil {
		t.Fatalf("spawn %s: %s", m.ID, formatError(err))
	}
	var res agentruntime.SpawnResult
	if err := json.Unmarshal(out, &res); err != nil || res.AgentInstanceID == "" {
		t.Fatalf("spawn %s answered %s (%v): want an agentInstanceId", m.ID, out, err)
	}
	return &res
}

func (c *agentRuntimeChecks) spawnChecks(t checkT) {
	res := c.spawn(t, "plugintest-spawn-writer", c.writer)
	want, err := c.writer.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if res.ManifestDigest != want {
		t.Errorf("manifestDigest = %q, want %q (sha256 of the canonical manifest)", res.ManifestDigest, want)
	}
	if res.SpawnedAt.IsZero() {
		t.Error("spawnedAt is missing")
	}
	again := c.spawn(t, "plugintest-spawn-writer", c.writer)
	if again.AgentInstanceID != res.AgentInstanceID {
		t.Errorf("the same idempotencyKey spawned a second instance: %s then %s", res.AgentInstanceID, again.AgentInstanceID)
	}
	c.writerID = res.AgentInstanceID
	c.analystID = c.spawn(t, "plugintest-spawn-analyst", c.analyst).AgentInstanceID
	bad := *c.writer
	bad.SystemPromptRef = "unpinned"
	raw, _ := json.Marshal(&bad)
	_, err = c.call(t, agentruntime.MethodSpawn, &agentruntime.SpawnRequest{Manifest: raw, IdempotencyKey: "plugintest-spawn-bad"})
	expectCode(t, err, wop.CodeValidation, "spawn with an unpinned systemPromptRef")
}

func (c *agentRuntimeChecks) delegate(t checkT) {
	c.host.script(func(string) string { return "analysis done" })
	before := c.host.generated()
	out, err := c.call(t, agentruntime.MethodDelegate, &agentruntime.DelegateRequest{
		Task:   json.RawMessage(`"statistics of this spreadsheet analysis"`),
		Agents: []string{c.writerID, c.analystID},
	})
	if err != nil {
		t.Fatalf("delegate: %s", formatError(err))
	}
	var res agentruntime.DelegateResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("delegate answered %s: %v", out, err)
	}
	if res.SelectedAgentID != c.analystID {
		t.Errorf("selectedAgentId = %q, want the analyst %q, whose skills match the task", res.SelectedAgentID, c.analystID)
	}
	if res.DelegationID == "" || res.Status != agentruntime.StatusCompleted {
		t.Errorf("delegate = %s: want a delegationId and status completed", out)
	}
	if !strings.Contains(string(res.Output), "analysis done") {
		t.Errorf("output = %s, want the agent's answer %q", res.Output, "analysis done")
	}
	if c.host.generated() == before {
		t.Error("the agent answered without calling aiEnvelope.generate on the host")
	}
	_, err = c.call(t, agentruntime.MethodDelegate, &agentruntime.DelegateRequest{Task: json.RawMessage(`"x"`), Agents: []string{"plugintest-no-such-agent"}})
	expectCode(t, err, agentruntime.CodeAgentNotFound, "delegate to an unknown agent")
}

// consensus checks that agreeing participants converge, then that a split
// under unanimous does not.
func (c *agentRuntimeChecks) consensus(t checkT) {
	participants := []string{c.analystID, c.writerID}
	c.consensusAgreed(t, participants)
	c.consensusSplit(t, participants)
}

// consensusOn asks participants to decide on a release under strategy;
// what names the call in a failure.
func (c *agentRuntimeChecks) consensusOn(t checkT, what string, participants []string, strategy string) (json.RawMessage, agentruntime.ConsensusResult) {
	t.Helper()
	var res agentruntime.ConsensusResult
	out, err := c.call(t, agentruntime.MethodConsensus, &agentruntime.ConsensusRequest{
		Proposal: json.RawMessage(`{"release":"1.0"}`), Participants: participants, Strategy: strategy,
	})
	if err != nil {
		t.Fatalf("%s: %s", what, formatError(err))
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("consensus answered %s: %v", out, err)
	}
	return out, res
}

func (c *agentRuntimeChecks) consensusAgreed(t checkT, participants []string) {
	c.host.script(func(string) string { return `{"vote":"approve","rationale":"fine"}` })
	out, res := c.consensusOn(t, "consensus", participants, agentruntime.StrategyMajority)
	if !res.Converged || !agentJSONSame(res.Decision, json.RawMessage(`"approve"`)) || res.Agreement != 1 || res.Rounds < 1 {
		t.Errorf("consensus = %s: want converged on \"approve\" with agreement 1", out)
	}
	if len(res.Ballots) != len(participants) {
		t.Fatalf("ballots = %s, want one per participant", out)
	}
	for i, b := range res.Ballots {
		if b.Participant != i || b.AgentID != participants[i] {
			t.Errorf("ballot %d = participant %d agent %q, want participant %d agent %q: ballots go in participant order",
				i, b.Participant, b.AgentID, i, participants[i])
		}
	}
}

func (c *agentRuntimeChecks) consensusSplit(t checkT, participants []string) {
	c.host.script(func(agent string) string {
		if strings.Contains(agent, c.writerID) {
			return `{"vote":"reject"}`
		}
		return `{"vote":"approve"}`
	})
	out, res := c.consensusOn(t, "split consensus", participants, agentruntime.StrategyUnanimous)
	if res.Converged || len(res.Decision) != 0 {
		t.Errorf("a split vote under unanimous = %s: want converged false and no decision", out)
	}
}

// messageSend checks deduplication by key and an unknown recipient, then,
// when the mailbox capacity is known, a full mailbox.
func (c *agentRuntimeChecks) messageSend(t checkT) {
	first, err := c.send(t, "plugintest-msg-0")
	if err != nil {
		t.Fatalf("messageSend: %s", formatError(err))
	}
	again, err := c.send(t, "plugintest-msg-0")
	if err != nil {
		t.Fatalf("messageSend again: %s", formatError(err))
	}
	var a, b agentruntime.MessageSendResult
	_ = json.Unmarshal(first, &a)
	_ = json.Unmarshal(again, &b)
	if a.MessageID == "" || a.MessageID != b.MessageID {
		t.Errorf("the same idempotencyKey gave messages %q and %q; want one message", a.MessageID, b.MessageID)
	}
	_, err = c.call(t, agentruntime.MethodMessageSend, &agentruntime.MessageSendRequest{
		FromAgentID: c.writerID, ToAgentID: "plugintest-no-such-agent", Channel: "plugintest", Content: json.RawMessage(`1`), IdempotencyKey: "k",
	})
	expectCode(t, err, agentruntime.CodeAgentNotFound, "messageSend to an unknown agent")
	if c.cfg.MailboxCapacity > 0 {
		c.mailboxFull(t)
	}
}

// send sends the writer's message with key to the analyst.
func (c *agentRuntimeChecks) send(t checkT, key string) (json.RawMessage, error) {
	return c.call(t, agentruntime.MethodMessageSend, &agentruntime.MessageSendRequest{
		FromAgentID: c.writerID, ToAgentID: c.analystID, Channel: "plugintest", Content: json.RawMessage(`{"n":1}`), IdempotencyKey: key,
	})
}

// mailboxFull fills the analyst's mailbox, which holds one message
// already, and expects a retryable mailbox_full.
func (c *agentRuntimeChecks) mailboxFull(t checkT) {
	capacity := c.cfg.MailboxCapacity
	var full error
	for i := 1; i <= capacity; i++ {
		if _, full = c.send(t, fmt.Sprint("plugintest-msg-", i)); full != nil {
			break
		}
	}
	if we := expectCode(t, full, agentruntime.CodeMailboxFull, fmt.Sprintf("message %d to a mailbox of %d", capacity+1, capacity)); we != nil && !we.Retryable {
		t.Errorf("mailbox_full is not retryable: %s", formatError(full))
	}
}

func agentCheckManifest(id, description, skill, tag string) *agentruntime.Manifest {
	return &agentruntime.Manifest{
		ID: id, Name: id, Description: description,
		SystemPromptRef: "plugintest-system@1",
		ToolAllowlist:   []string{},
		Skills:          []agentruntime.Skill{{ID: skill, Tags: []string{tag}}},
	}
}

// agentHost answers the plugin's callbacks for the agentRuntime checks.
type agentHost struct {
	mu      sync.Mutex
	answer  func(caller string) string
	nGenned int
}

func (h *agentHost) script(fn func(caller string) string) {
	h.mu.Lock()
	h.answer = fn
	h.mu.Unlock()
}

func (h *agentHost) generated() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nGenned
}

func (h *agentHost) serve(_ context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
	switch family + "." + method {
	case "promptLibrary.get":
		var req struct {
			PromptID string `json:"promptId"`
		}
		_ = json.Unmarshal(payload, &req)
		raw := "You are a test agent. Answer briefly."
		return json.Marshal(map[string]any{
			"promptId": req.PromptID, "name": "plugintest-system", "version": "1",
			"digest": "sha256:" + agentSHA256Hex(raw), "systemPrompt": raw, "raw": raw,
		})
	case "aiEnvelope.generate":
		var req struct {
			EnvelopeType string `json:"envelopeType"`
		}
		_ = json.Unmarshal(payload, &req)
		h.mu.Lock()
		h.nGenned++
		answer := h.answer
		h.mu.Unlock()
		text := "ok"
		if answer != nil {
			text = answer(call.Caller)
		}
		res := map[string]any{
			"envelopeType": req.EnvelopeType, "envelopeId": fmt.Sprint("env_", time.Now().UnixNano()), "status": "completed",
			"payload": json.RawMessage(agentJSONString(text)), "text": text, "finishReason": "stop",
			"usage": map[string]int{"inputTokens": 10, "outputTokens": 5}, "model": "plugintest", "provider": "plugintest", "warnings": []any{},
		}
		// A JSON answer is also given as the parsed payload, as a
		// provider asked for json output would.
		if json.Valid([]byte(text)) {
			res["payload"] = json.RawMessage(text)
		}
		return json.Marshal(res)
	}
	return nil, wop.NotProvided("host." + family + "." + method)
}

func agentJSONString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func agentJSONSame(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

func agentSHA256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
