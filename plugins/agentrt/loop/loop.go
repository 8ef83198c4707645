// Package loop runs one agent on one task: the system prompt from
// promptLibrary, then turns of aiEnvelope.generate with the agent's
// allowed tools, the tool calls the model asks for through mcp.callTool,
// and the tool results back to the model, until the model answers without
// calling a tool or a limit is reached.
//
// Every step is a host-service call through a wop.Caller, so the host
// sees, bounds and records all of it; the loop calls no provider and no
// MCP server itself.
//
// # Limits
//
//   - turns: generate calls per run. A model that still asks for tools on
//     the last allowed turn ends the run with agent_budget_exceeded
//     (details.limit "turns"); its tool calls are not made.
//   - toolCalls: tool calls per run, handoffs included; the call past the
//     limit is not made and ends the run with agent_budget_exceeded
//     (details.limit "toolCalls").
//   - delegationDepth: a handoff is offered only while the run's depth is
//     below the limit; the handed-off run has depth + 1.
//   - timeoutMs: wall-clock time of the run; when it runs out the run
//     ends with agent_timeout.
//   - tokenBudget: input plus output tokens over every generate call of
//     the run, from generate's usage (a handoff's tokens count against
//     the caller's budget too). Once spent, the run ends with
//     agent_budget_exceeded (details.limit "tokenBudget"); while less than
//     MaxOutputTokens remain, generate's maxTokens is lowered to what
//     remains.
//
// # Failures
//
// A failure of another family keeps that family's code, says which step
// failed, and carries the original envelope, unaltered, under
// details.cause. It is retryable when that envelope is, or any cause
// nested under it (wop.Error.WithCause): an aiEnvelope plugin restarting
// under a turn leaves the run worth running again. Two answers from mcp are not failures
// of the run: an mcp_error (a JSON-RPC error from the server) goes back
// to the model as an error tool result, as does a call to a tool that is
// not in the agent's toolAllowlist, which the loop refuses itself
// without calling mcp.
package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/wop"
)

// Defaults used where neither the manifest nor the runtime configuration
// sets a limit.
const (
	DefaultTurns           = 10
	DefaultToolCalls       = 20
	DefaultDelegationDepth = 2
	DefaultTimeout         = 2 * time.Minute
	DefaultTokenBudget     = 100_000
	// MaxOutputTokens is the output size below which the remaining token
	// budget is passed to generate as maxTokens.
	MaxOutputTokens = 8192
	// maxToolPages bounds the listTools pages read per server.
	maxToolPages = 20
	// maxToolNameLen is the longest tool name offered to a model; common
	// providers accept 64 characters.
	maxToolNameLen = 64
)

// Limits bound one run. Zero fields are not "unlimited": Resolve fills
// them from the defaults.
type Limits struct {
	Turns           int
	ToolCalls       int
	DelegationDepth int
	Timeout         time.Duration
	TokenBudget     int64
}

// DefaultLimits returns the package defaults.
func DefaultLimits() Limits {
	return Limits{Turns: DefaultTurns, ToolCalls: DefaultToolCalls, DelegationDepth: DefaultDelegationDepth,
		Timeout: DefaultTimeout, TokenBudget: DefaultTokenBudget}
}

// Resolve returns the limits of a run: base (the runtime's defaults),
// replaced field by field by the manifest's limits, then lowered by the
// spawn config's limits (which may only tighten), and never above ceiling
// (the runtime's maximum) where ceiling sets a field.
func Resolve(base Limits, manifest, spawn *agentruntime.Limits, ceiling Limits) Limits {
	l := base
	if m := manifest; m != nil {
		setInt(&l.Turns, m.Turns, false)
		setInt(&l.ToolCalls, m.ToolCalls, false)
		setInt(&l.DelegationDepth, m.DelegationDepth, false)
		setDur(&l.Timeout, m.TimeoutMs, false)
		setInt64(&l.TokenBudget, m.TokenBudget, false)
	}
	if s := spawn; s != nil {
		setInt(&l.Turns, s.Turns, true)
		setInt(&l.ToolCalls, s.ToolCalls, true)
		setInt(&l.DelegationDepth, s.DelegationDepth, true)
		setDur(&l.Timeout, s.TimeoutMs, true)
		setInt64(&l.TokenBudget, s.TokenBudget, true)
	}
	if ceiling.Turns > 0 {
		l.Turns = min(l.Turns, ceiling.Turns)
	}
	if ceiling.ToolCalls > 0 {
		l.ToolCalls = min(l.ToolCalls, ceiling.ToolCalls)
	}
	if ceiling.DelegationDepth > 0 {
		l.DelegationDepth = min(l.DelegationDepth, ceiling.DelegationDepth)
	}
	if ceiling.Timeout > 0 {
		l.Timeout = min(l.Timeout, ceiling.Timeout)
	}
	if ceiling.TokenBudget > 0 {
		l.TokenBudget = min(l.TokenBudget, ceiling.TokenBudget)
	}
	return l
}

func setInt(dst *int, v *int, lowerOnly bool) {
	if v != nil && (!lowerOnly || *v < *dst) {
		*dst = *v
	}
}

func setInt64(dst *int64, v *int64, lowerOnly bool) {
	if v != nil && (!lowerOnly || *v < *dst) {
		*dst = *v
	}
}

func setDur(dst *time.Duration, ms *int64, lowerOnly bool) {
	if ms == nil {
		return
	}
	d := time.Duration(*ms) * time.Millisecond
	if !lowerOnly || d < *dst {
		*dst = d
	}
}

// Agent is what a run needs to know about the agent instance.
type Agent struct {
	InstanceID string
	Manifest   *agentruntime.Manifest
	Limits     Limits
}

// Task is one piece of work for an agent.
type Task struct {
	// ID names the task; generate idempotency keys derive from it, so a
	// replayed task asks the same questions under the same keys.
	ID string
	// Input is the user message that states the task.
	Input string
	// Context are messages placed before Input, such as mailbox messages.
	Context []aienvelope.Message
	// Output, when set, asks generate for that result format on every
	// turn.
	Output *aienvelope.Output
	// Depth is the handoff depth of this run; 0 for a run the runtime
	// started itself.
	Depth int
}

// Result is the outcome of a run that ended with an answer.
type Result struct {
	// Text is the model's final text; Payload its parsed JSON output when
	// Task.Output asked for JSON.
	Text    string
	Payload json.RawMessage
	// Turns, ToolCalls and Usage are what the run consumed, handoffs
	// included.
	Turns     int
	ToolCalls int
	Usage     Usage
}

// Resolver finds the agent a handoff target (a manifest id) names, for a
// run at the given depth.
type Resolver func(ctx context.Context, manifestID string) (Agent, error)

// Runner runs agents through the host.
type Runner struct {
	// Host is the host-services callback.
	Host wop.Caller
	// EnvelopeType is sent with every generate call; "" means
	// "agentRuntime.turn".
	EnvelopeType string
	// Handoff, if set, resolves handoff targets; without it no handoff is
	// offered.
	Handoff Resolver
}

// run is the mutable state of one run.
type run struct {
	r       *Runner
	agent   Agent
	task    Task
	res     *Result
	tools   map[string]toolTarget // model-facing name → target
	offered []aienvelope.Tool
	// budget is shared with handoff runs, so that their tokens and tool
	// calls count against the caller's limits.
	budget *budget
}

type budget struct {
	tokens    int64 // remaining tokens
	toolCalls int   // remaining tool calls
}

type toolTarget struct {
	ref     agentruntime.ToolRef
	handoff string // manifest id when this is a handoff
}

// Run runs agent on task and returns its answer, or a *wop.Error.
func (r *Runner) Run(ctx context.Context, agent Agent, task Task) (*Result, error) {
	agent.Limits = normalize(agent.Limits)
	b := &budget{tokens: agent.Limits.TokenBudget, toolCalls: agent.Limits.ToolCalls}
	return r.run(ctx, agent, task, b)
}

// normalize replaces the limits that cannot be zero (turns, timeout,
// token budget) with the defaults when they are. Zero tool calls and zero
// delegation depth are meaningful: none allowed.
func normalize(l Limits) Limits {
	if l.Turns <= 0 {
		l.Turns = DefaultTurns
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.TokenBudget <= 0 {
		l.TokenBudget = DefaultTokenBudget
	}
	return l
}

func (r *Runner) run(parent context.Context, agent Agent, task Task, b *budget) (*Result, error) {
	if agent.Manifest == nil {
		return nil, wop.Errorf(wop.CodeInternal, "agent %s has no manifest", agent.InstanceID)
	}
	agent.Limits = normalize(agent.Limits)
	ctx, cancel := context.WithTimeout(parent, agent.Limits.Timeout)
	defer cancel()
	rn := &run{r: r, agent: agent, task: task, res: &Result{}, budget: b}
	res, err := rn.loop(ctx)
	if err != nil {
		return nil, rn.timeoutError(parent, ctx, err)
	}
	return res, nil
}

// timeoutError turns a failure caused by the run's own timeout into
// agent_timeout; the caller's own deadline or cancellation is reported as
// such.
func (rn *run) timeoutError(parent, ctx context.Context, err error) error {
	if parent.Err() != nil {
		if errors.Is(parent.Err(), context.DeadlineExceeded) {
			return wop.Errorf(wop.CodeDeadlineExceeded, "agent %s: the call's deadline passed", rn.agent.InstanceID)
		}
		return wop.Errorf(wop.CodeCancelled, "agent %s: cancelled", rn.agent.InstanceID)
	}
	if ctx.Err() != nil {
		we := wop.AsError(err)
		if we.Code == agentruntime.CodeAgentTimeout {
			return we
		}
		return (&wop.Error{
			Code:    agentruntime.CodeAgentTimeout,
			Message: fmt.Sprintf("agent %s ran out of its %s timeout", rn.agent.InstanceID, rn.agent.Limits.Timeout),
		}).WithDetails(map[string]any{"agentInstanceId": rn.agent.InstanceID, "limit": "timeoutMs",
			"turns": rn.res.Turns, "toolCalls": rn.res.ToolCalls})
	}
	return err
}

func (rn *run) loop(ctx context.Context) (*Result, error) {
	m := rn.agent.Manifest
	system, err := rn.systemPrompt(ctx)
	if err != nil {
		return nil, err
	}
	if err := rn.prepareTools(ctx); err != nil {
		return nil, err
	}
	messages := append([]aienvelope.Message{}, rn.task.Context...)
	messages = append(messages, aienvelope.Message{Role: "user", Content: rn.task.Input})
	envelope := rn.r.EnvelopeType
	if envelope == "" {
		envelope = "agentRuntime.turn"
	}
	// turns counts this agent's own generate calls; rn.res.Turns also
	// counts those of its handoffs.
	turns := 0
	for {
		if rn.budget.tokens <= 0 {
			return nil, rn.exceeded("tokenBudget", fmt.Sprintf("the %d-token budget is spent", rn.agent.Limits.TokenBudget))
		}
		req := aienvelope.GenerateRequest{
			EnvelopeType:   envelope,
			SystemPrompt:   system,
			Messages:       messages,
			Model:          m.Model,
			Output:         rn.task.Output,
			Tools:          rn.offered,
			IdempotencyKey: fmt.Sprintf("%s/turn/%d", rn.task.ID, turns+1),
		}
		if rn.budget.tokens < MaxOutputTokens {
			mt := int(rn.budget.tokens)
			req.MaxTokens = &mt
		}
		turns++
		rn.res.Turns++
		gen, err := aienvelope.NewClient(rn.r.Host, nil).Generate(ctx, &req)
		if err != nil {
			return nil, rn.cause(step(aienvelope.Family, aienvelope.MethodGenerate), err)
		}
		rn.res.Usage.add(int64(gen.Usage.InputTokens), int64(gen.Usage.OutputTokens))
		rn.budget.tokens -= int64(gen.Usage.InputTokens + gen.Usage.OutputTokens)
		if rn.budget.tokens < 0 {
			return nil, rn.exceeded("tokenBudget", fmt.Sprintf("the run used %d tokens of a %d-token budget",
				rn.res.Usage.Total(), rn.agent.Limits.TokenBudget))
		}
		if len(gen.ToolCalls) == 0 {
			rn.res.Text = gen.Text
			if len(gen.Payload) > 0 && !bytes.Equal(bytes.TrimSpace(gen.Payload), []byte("null")) {
				rn.res.Payload = gen.Payload
			}
			return rn.res, nil
		}
		if turns >= rn.agent.Limits.Turns {
			return nil, rn.exceeded("turns", fmt.Sprintf("the model still called tools on its last allowed turn (%d)", turns))
		}
		messages = append(messages, aienvelope.Message{Role: "assistant", Content: gen.Text, ToolCalls: gen.ToolCalls})
		for _, tc := range gen.ToolCalls {
			if rn.budget.toolCalls <= 0 {
				return nil, rn.exceeded("toolCalls", fmt.Sprintf("the model asked for more than %d tool calls", rn.agent.Limits.ToolCalls))
			}
			rn.budget.toolCalls--
			rn.res.ToolCalls++
			content, err := rn.callTool(ctx, tc)
			if err != nil {
				return nil, err
			}
			messages = append(messages, aienvelope.Message{Role: "tool", ToolCallID: tc.ID, Name: tc.Name, Content: content})
		}
	}
}

func (rn *run) systemPrompt(ctx context.Context) (string, error) {
	ref := rn.agent.Manifest.SystemPromptRef
	pin, err := agentruntime.ParsePromptPin(ref)
	if err != nil {
		return "", wop.Errorf(wop.CodeValidation, "agent %s: systemPromptRef: %v", rn.agent.InstanceID, err)
	}
	p, err := promptlibrary.NewClient(rn.r.Host, nil).Get(ctx, &promptlibrary.GetRequest{PromptID: ref})
	if err != nil {
		return "", rn.cause(step(promptlibrary.Family, promptlibrary.MethodGet), err)
	}
	// The host checks the digest against the bytes; the loop checks that
	// what came back is what the manifest pinned.
	if (pin.Digest != "" && p.Digest != pin.Digest) || (pin.Version != "" && p.Version != pin.Version) {
		return "", (&wop.Error{
			Code: promptlibrary.CodePromptDigestMismatch,
			Message: fmt.Sprintf("agent %s: promptLibrary.get %s returned version %q digest %q",
				rn.agent.InstanceID, ref, p.Version, p.Digest),
		}).WithDetails(map[string]any{"agentInstanceId": rn.agent.InstanceID, "step": step(promptlibrary.Family, promptlibrary.MethodGet)})
	}
	return p.SystemPrompt, nil
}

// prepareTools describes the allowlisted tools from the servers' own
// listings, and the handoff targets, under names a model accepts.
func (rn *run) prepareTools(ctx context.Context) error {
	rn.tools = map[string]toolTarget{}
	m := rn.agent.Manifest
	wanted := map[string]map[string]bool{} // server → tool names
	var order []agentruntime.ToolRef
	for _, ref := range m.Tools() {
		if wanted[ref.ServerID] == nil {
			wanted[ref.ServerID] = map[string]bool{}
		}
		wanted[ref.ServerID][ref.Tool] = true
		order = append(order, ref)
	}
	described := map[string]aienvelope.Tool{} // "server/tool" → description
	for _, server := range m.MCPServers() {
		var cursor *string
		for page := 0; page < maxToolPages; page++ {
			raw, err := mcp.NewClient(rn.r.Host, nil).ListTools(ctx, &mcp.ListToolsRequest{ServerID: server, Cursor: cursor})
			if err != nil {
				return rn.cause(step(mcp.Family, mcp.MethodListTools), err)
			}
			var lt listToolsResult
			if err := json.Unmarshal(raw, &lt); err != nil {
				return rn.cause(step(mcp.Family, mcp.MethodListTools), wop.Errorf(wop.CodeUpstreamUnavailable, "listTools of %s: %v", server, err))
			}
			for _, t := range lt.Tools {
				if wanted[server][t.Name] {
					schema := t.InputSchema
					if len(bytes.TrimSpace(schema)) == 0 || bytes.Equal(bytes.TrimSpace(schema), []byte("null")) {
						schema = json.RawMessage(`{"type":"object"}`)
					}
					described[server+"/"+t.Name] = aienvelope.Tool{Description: t.Description, InputSchema: schema}
				}
			}
			if lt.NextCursor == nil || *lt.NextCursor == "" {
				break
			}
			cursor = lt.NextCursor
		}
	}
	// Tools in allowlist order; a tool the server does not list cannot be
	// described, so it is not offered.
	for _, ref := range order {
		d, ok := described[ref.String()]
		if !ok {
			continue
		}
		name := rn.uniqueName(sanitize(ref.ServerID) + "__" + sanitize(ref.Tool))
		rn.tools[name] = toolTarget{ref: ref}
		rn.offered = append(rn.offered, aienvelope.Tool{Name: name, Description: d.Description, InputSchema: d.InputSchema})
	}
	if m.Handoff != nil && rn.r.Handoff != nil && rn.task.Depth < rn.agent.Limits.DelegationDepth {
		for _, target := range m.Handoff.Targets {
			name := rn.uniqueName("handoff__" + sanitize(target))
			rn.tools[name] = toolTarget{handoff: target}
			rn.offered = append(rn.offered, aienvelope.Tool{
				Name:        name,
				Description: "Hand a task to the agent " + target + " and get its answer back.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","description":"the task for the other agent"}},"required":["task"]}`),
			})
		}
	}
	return nil
}

var unsafeToolChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

func sanitize(s string) string { return unsafeToolChars.ReplaceAllString(s, "_") }

// uniqueName shortens name to what providers accept and makes it unique
// among the tools offered so far with a numeric suffix.
func (rn *run) uniqueName(name string) string {
	if len(name) > maxToolNameLen {
		name = name[:maxToolNameLen]
	}
	candidate := name
	for i := 2; ; i++ {
		if _, taken := rn.tools[candidate]; !taken {
			return candidate
		}
		suffix := fmt.Sprintf("_%d", i)
		candidate = name[:min(len(name), maxToolNameLen-len(suffix))] + suffix
	}
}

// callTool makes one tool call and returns the tool message content.
func (rn *run) callTool(ctx context.Context, tc aienvelope.ToolCall) (string, error) {
	target, ok := rn.tools[tc.Name]
	if !ok {
		return toolError(fmt.Sprintf("tool %q is not available to this agent", tc.Name)), nil
	}
	args := bytes.TrimSpace(tc.Arguments)
	if len(args) == 0 {
		args = []byte("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return toolError(fmt.Sprintf("the arguments of %s are not a JSON object", tc.Name)), nil
	}
	if target.handoff != "" {
		return rn.handoff(ctx, target.handoff, obj)
	}
	// Defence in depth: the host enforces the allowlist too.
	if !rn.agent.Manifest.Allows(target.ref.ServerID, target.ref.Tool) {
		return toolError(fmt.Sprintf("tool %s is not in this agent's toolAllowlist", target.ref)), nil
	}
	result, err := mcp.NewClient(rn.r.Host, nil).CallTool(ctx, &mcp.CallToolRequest{
		ServerID: target.ref.ServerID, Name: target.ref.Tool, Arguments: args,
	})
	if err != nil {
		if we := wop.AsError(err); we.Code == wop.CodeMCPError && ctx.Err() == nil {
			// The server refused the call; the model may correct it.
			return toolError(fmt.Sprintf("%s failed: %s %s", target.ref, we.Message, we.Details)), nil
		}
		return "", rn.cause(step(mcp.Family, mcp.MethodCallTool)+" "+target.ref.String(), err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, result); err != nil {
		return "", rn.cause(step(mcp.Family, mcp.MethodCallTool)+" "+target.ref.String(),
			wop.Errorf(wop.CodeUpstreamUnavailable, "callTool result is not JSON: %v", err))
	}
	return compact.String(), nil
}

// handoff runs another agent on a sub-task, one level deeper, sharing
// this run's token and tool-call budget.
func (rn *run) handoff(ctx context.Context, target string, args map[string]json.RawMessage) (string, error) {
	var sub string
	if err := json.Unmarshal(args["task"], &sub); err != nil || strings.TrimSpace(sub) == "" {
		return toolError("a handoff needs a non-empty string task"), nil
	}
	agent, err := rn.r.Handoff(ctx, target)
	if err != nil {
		return "", rn.cause("handoff "+target, err)
	}
	res, err := rn.r.run(ctx, agent, Task{
		ID:    fmt.Sprintf("%s/handoff/%d", rn.task.ID, rn.res.ToolCalls),
		Input: sub,
		Depth: rn.task.Depth + 1,
	}, rn.budget)
	if res != nil {
		rn.res.Turns += res.Turns
		rn.res.ToolCalls += res.ToolCalls
		rn.res.Usage.add(res.Usage.InputTokens, res.Usage.OutputTokens)
	}
	if err != nil {
		return "", err
	}
	if len(res.Payload) > 0 {
		return string(res.Payload), nil
	}
	return res.Text, nil
}

func toolError(text string) string {
	b, _ := json.Marshal(map[string]any{"isError": true, "content": []any{map[string]string{"type": "text", "text": text}}})
	return string(b)
}

// exceeded is agent_budget_exceeded for the named limit.
func (rn *run) exceeded(limit, why string) error {
	return (&wop.Error{
		Code:    agentruntime.CodeAgentBudgetExceeded,
		Message: fmt.Sprintf("agent %s: %s", rn.agent.InstanceID, why),
	}).WithDetails(map[string]any{
		"agentInstanceId": rn.agent.InstanceID, "limit": limit,
		"turns": rn.res.Turns, "toolCalls": rn.res.ToolCalls, "usage": rn.res.Usage,
	})
}

// cause wraps a failure of another family: same code, the step in the
// message, the original envelope under details.cause, retryable by the
// SDK's rule for causes.
func (rn *run) cause(step string, err error) error {
	we := wop.AsError(err)
	if we.Code == agentruntime.CodeAgentBudgetExceeded || we.Code == agentruntime.CodeAgentTimeout {
		return we // a handoff's own limit, already explained
	}
	return (&wop.Error{
		Code:      we.Code,
		Message:   fmt.Sprintf("agent %s: %s: %s", rn.agent.InstanceID, step, we.Message),
		Retryable: we.Retryable,
	}).WithDetails(map[string]any{"agentInstanceId": rn.agent.InstanceID, "step": step}).WithCause(we)
}

// step names a host-service call in an error's details: "family.method".
func step(family, method string) string { return family + "." + method }
