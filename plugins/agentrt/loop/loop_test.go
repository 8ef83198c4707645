package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/wop"
)

const pinHex = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"

type call struct {
	family, method string
	req            string
}

// fakeHost is a wop.Caller that behaves like the real one on the wire:
// the request is marshalled to JSON and the answer unmarshalled into res.
// handle returns the answer as JSON or an error.
type fakeHost struct {
	mu     sync.Mutex
	calls  []call
	handle func(ctx context.Context, family, method string, req json.RawMessage) (string, error)
}

func (f *fakeHost) Call(ctx context.Context, family, method string, req, res any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.calls = append(f.calls, call{family, method, string(b)})
	f.mu.Unlock()
	out, err := f.handle(ctx, family, method, b)
	if err != nil {
		return err
	}
	if res == nil {
		return nil
	}
	return json.Unmarshal([]byte(out), res)
}

func (f *fakeHost) count(family, method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.family == family && c.method == method {
			n++
		}
	}
	return n
}

func (f *fakeHost) requests(family, method string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if c.family == family && c.method == method {
			out = append(out, c.req)
		}
	}
	return out
}

// host scripts the three families: the prompt, two pages of tools from
// "docs", and generate answers taken in order from turns.
type host struct {
	turns   []string
	next    int
	tools   func(name string, args json.RawMessage) (string, error)
	genErr  error
	promptV string
}

func (h *host) fake() *fakeHost {
	return &fakeHost{handle: func(ctx context.Context, family, method string, req json.RawMessage) (string, error) {
		switch family + "." + method {
		case "promptLibrary.get":
			v := h.promptV
			if v == "" {
				v = "3"
			}
			return fmt.Sprintf(`{"promptId":"researcher-system@3","name":"researcher-system","version":%q,"digest":"sha256:%s","systemPrompt":"You research.","raw":"You research."}`, v, pinHex), nil
		case "mcp.listTools":
			var r struct {
				ServerID string
				Cursor   *string
			}
			_ = json.Unmarshal(req, &r)
			if r.Cursor == nil {
				return `{"tools":[{"name":"search","description":"Search the docs","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}},
					{"name":"delete","description":"Delete a doc","inputSchema":{"type":"object"}}],"nextCursor":"p2"}`, nil
			}
			return `{"tools":[{"name":"fetch.page","description":"Fetch a page"}]}`, nil
		case "mcp.callTool":
			var r struct {
				Name      string
				Arguments json.RawMessage
			}
			_ = json.Unmarshal(req, &r)
			if h.tools != nil {
				return h.tools(r.Name, r.Arguments)
			}
			return `{"content":[{"type":"text","text":"result of ` + r.Name + `"}],"isError":false}`, nil
		case "aiEnvelope.generate":
			if h.genErr != nil {
				return "", h.genErr
			}
			if h.next >= len(h.turns) {
				// Block until the run gives up: a model that never answers.
				<-ctx.Done()
				return "", wop.Errorf(wop.CodeDeadlineExceeded, "generate: %v", ctx.Err())
			}
			h.next++
			return h.turns[h.next-1], nil
		}
		return "", wop.NotProvided("host." + family + "." + method)
	}}
}

func answer(text string, in, out int) string {
	return fmt.Sprintf(`{"status":"completed","text":%q,"payload":null,"finishReason":"stop","usage":{"inputTokens":%d,"outputTokens":%d}}`, text, in, out)
}

func toolTurn(in, out int, calls ...string) string {
	return fmt.Sprintf(`{"status":"completed","text":"","toolCalls":[%s],"finishReason":"tool_calls","usage":{"inputTokens":%d,"outputTokens":%d}}`,
		strings.Join(calls, ","), in, out)
}

func tc(id, name, args string) string {
	return fmt.Sprintf(`{"id":%q,"name":%q,"arguments":%s}`, id, name, args)
}

func researcher() *agentruntime.Manifest {
	return &agentruntime.Manifest{
		ID: "researcher", Name: "Researcher", Description: "Finds sources.",
		SystemPromptRef: "researcher-system@3#sha256:" + pinHex,
		ToolAllowlist:   []string{"docs/search", "docs/fetch.page", "docs/missing"},
	}
}

func agent(m *agentruntime.Manifest, l Limits) Agent {
	return Agent{InstanceID: "agt_r", Manifest: m, Limits: l}
}

func wantCode(t *testing.T, err error, code string) *wop.Error {
	t.Helper()
	var we *wop.Error
	if !errors.As(err, &we) || we.Code != code {
		t.Fatalf("error = %v, want code %s", err, code)
	}
	return we
}

func details(t *testing.T, we *wop.Error) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(we.Details, &d); err != nil {
		t.Fatalf("details %s: %v", we.Details, err)
	}
	return d
}

func TestRunWithTools(t *testing.T) {
	h := &host{turns: []string{
		toolTurn(10, 5, tc("c1", "docs__search", `{"q":"agents"}`), tc("c2", "docs__fetch_page", `{}`)),
		answer("Three sources found.", 30, 7),
	}}
	f := h.fake()
	r := &Runner{Host: f}
	res, err := r.Run(context.Background(), agent(researcher(), DefaultLimits()), Task{ID: "tsk_1", Input: "find sources on agents"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Three sources found." || res.Turns != 2 || res.ToolCalls != 2 || res.Usage != (Usage{40, 12}) {
		t.Fatalf("result = %+v", res)
	}
	if got := f.requests("promptLibrary", "get"); len(got) != 1 || got[0] != `{"promptId":"researcher-system@3#sha256:`+pinHex+`"}` {
		t.Errorf("prompt requests = %v", got)
	}
	lists := f.requests("mcp", "listTools")
	if len(lists) != 2 || lists[0] != `{"serverId":"docs"}` || lists[1] != `{"serverId":"docs","cursor":"p2"}` {
		t.Errorf("listTools requests = %v", lists)
	}
	calls := f.requests("mcp", "callTool")
	if len(calls) != 2 || calls[0] != `{"serverId":"docs","name":"search","arguments":{"q":"agents"}}` ||
		calls[1] != `{"serverId":"docs","name":"fetch.page","arguments":{}}` {
		t.Errorf("callTool requests = %v", calls)
	}
	gens := f.requests("aiEnvelope", "generate")
	if len(gens) != 2 {
		t.Fatalf("generate calls = %d", len(gens))
	}
	var first, second aienvelope.GenerateRequest
	_ = json.Unmarshal([]byte(gens[0]), &first)
	_ = json.Unmarshal([]byte(gens[1]), &second)
	if first.SystemPrompt != "You research." || first.IdempotencyKey != "tsk_1/turn/1" || second.IdempotencyKey != "tsk_1/turn/2" {
		t.Errorf("first generate = %s", gens[0])
	}
	// Offered: the allowlisted tools the server lists, in allowlist order;
	// not "delete" (listed, not allowed), not "missing" (allowed, not listed).
	var names []string
	for _, tl := range first.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "docs__search,docs__fetch_page" {
		t.Errorf("offered tools = %v", names)
	}
	if string(first.Tools[0].InputSchema) != `{"type":"object","properties":{"q":{"type":"string"}}}` || first.Tools[0].Description != "Search the docs" {
		t.Errorf("search tool = %+v", first.Tools[0])
	}
	if string(first.Tools[1].InputSchema) != `{"type":"object"}` {
		t.Errorf("a tool without a schema gets an empty object schema, got %s", first.Tools[1].InputSchema)
	}
	// The second turn carries the assistant's calls and both results.
	if len(second.Messages) != 4 || second.Messages[1].Role != "assistant" || len(second.Messages[1].ToolCalls) != 2 ||
		second.Messages[2].Role != "tool" || second.Messages[2].ToolCallID != "c1" ||
		second.Messages[2].Content != `{"content":[{"type":"text","text":"result of search"}],"isError":false}` ||
		second.Messages[3].ToolCallID != "c2" {
		t.Errorf("second turn messages = %+v", second.Messages)
	}
}

func TestAllowlistRefusedLocally(t *testing.T) {
	h := &host{turns: []string{
		// A tool the server has but the agent may not use, and a name
		// that was never offered.
		toolTurn(1, 1, tc("c1", "docs__delete", `{}`), tc("c2", "files__read", `{}`)),
		answer("ok", 1, 1),
	}}
	f := h.fake()
	res, err := (&Runner{Host: f}).Run(context.Background(), agent(researcher(), DefaultLimits()), Task{ID: "t", Input: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if n := f.count("mcp", "callTool"); n != 0 {
		t.Fatalf("callTool made %d times for tools outside the allowlist", n)
	}
	var second aienvelope.GenerateRequest
	_ = json.Unmarshal([]byte(f.requests("aiEnvelope", "generate")[1]), &second)
	for _, m := range second.Messages[2:] {
		if !strings.Contains(m.Content, `"isError":true`) || !strings.Contains(m.Content, "not available") {
			t.Errorf("refusal message = %q", m.Content)
		}
	}
	if res.ToolCalls != 2 {
		t.Errorf("refused calls count against the limit too: got %d", res.ToolCalls)
	}
}

func TestDefenceInDepthAllows(t *testing.T) {
	// A target whose manifest no longer allows it (e.g. a tampered map)
	// is still refused before mcp is called.
	m := researcher()
	rn := &run{r: &Runner{Host: (&host{}).fake()}, agent: agent(m, DefaultLimits()), res: &Result{},
		tools: map[string]toolTarget{"x": {ref: agentruntime.ToolRef{ServerID: "docs", Tool: "delete"}}}}
	out, err := rn.callTool(context.Background(), aienvelope.ToolCall{ID: "1", Name: "x", Arguments: json.RawMessage(`{}`)})
	if err != nil || !strings.Contains(out, "toolAllowlist") {
		t.Fatalf("callTool = %q, %v", out, err)
	}
}

func TestTurnsExhausted(t *testing.T) {
	loopTurn := toolTurn(1, 1, tc("c", "docs__search", `{"q":"again"}`))
	h := &host{turns: []string{loopTurn, loopTurn, loopTurn, loopTurn}}
	f := h.fake()
	l := DefaultLimits()
	l.Turns = 2
	_, err := (&Runner{Host: f}).Run(context.Background(), agent(researcher(), l), Task{ID: "t", Input: "x"})
	we := wantCode(t, err, agentruntime.CodeAgentBudgetExceeded)
	if d := details(t, we); d["limit"] != "turns" || d["turns"] != 2.0 {
		t.Errorf("details = %s", we.Details)
	}
	if g, c := f.count("aiEnvelope", "generate"), f.count("mcp", "callTool"); g != 2 || c != 1 {
		t.Errorf("generate %d, callTool %d; want 2, 1 (no tool call on the last turn)", g, c)
	}
}

func TestToolCallsExhausted(t *testing.T) {
	h := &host{turns: []string{toolTurn(1, 1, tc("a", "docs__search", `{}`), tc("b", "docs__search", `{}`))}}
	f := h.fake()
	l := DefaultLimits()
	l.ToolCalls = 1
	_, err := (&Runner{Host: f}).Run(context.Background(), agent(researcher(), l), Task{ID: "t", Input: "x"})
	we := wantCode(t, err, agentruntime.CodeAgentBudgetExceeded)
	if d := details(t, we); d["limit"] != "toolCalls" {
		t.Errorf("details = %s", we.Details)
	}
	if c := f.count("mcp", "callTool"); c != 1 {
		t.Errorf("callTool %d times, want 1", c)
	}
}

func TestTokenBudget(t *testing.T) {
	loopTurn := toolTurn(40, 20, tc("c", "docs__search", `{}`))
	h := &host{turns: []string{loopTurn, loopTurn, loopTurn}}
	f := h.fake()
	l := DefaultLimits()
	l.TokenBudget = 100
	_, err := (&Runner{Host: f}).Run(context.Background(), agent(researcher(), l), Task{ID: "t", Input: "x"})
	we := wantCode(t, err, agentruntime.CodeAgentBudgetExceeded)
	if d := details(t, we); d["limit"] != "tokenBudget" {
		t.Errorf("details = %s", we.Details)
	}
	gens := f.requests("aiEnvelope", "generate")
	if len(gens) != 2 {
		t.Fatalf("generate calls = %d, want 2 (60 + 60 > 100)", len(gens))
	}
	// The remaining budget bounds the output of each turn.
	if !strings.Contains(gens[0], `"maxTokens":100`) || !strings.Contains(gens[1], `"maxTokens":40`) {
		t.Errorf("maxTokens not lowered to the remaining budget:\n%s\n%s", gens[0], gens[1])
	}
}

func TestTimeout(t *testing.T) {
	h := &host{} // generate never answers
	l := DefaultLimits()
	l.Timeout = 50 * time.Millisecond
	_, err := (&Runner{Host: h.fake()}).Run(context.Background(), agent(researcher(), l), Task{ID: "t", Input: "x"})
	we := wantCode(t, err, agentruntime.CodeAgentTimeout)
	if d := details(t, we); d["limit"] != "timeoutMs" {
		t.Errorf("details = %s", we.Details)
	}
	// The caller's own deadline is reported as such, not as the agent's.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = (&Runner{Host: h.fake()}).Run(ctx, agent(researcher(), DefaultLimits()), Task{ID: "t", Input: "x"})
	wantCode(t, err, wop.CodeDeadlineExceeded)
}

func TestCausesFromOtherFamilies(t *testing.T) {
	h := &host{genErr: &wop.Error{Code: "provider_rate_limited", Message: "slow down", Retryable: true, Details: json.RawMessage(`{"retryAfterMs":1000}`)}}
	_, err := (&Runner{Host: h.fake()}).Run(context.Background(), agent(researcher(), DefaultLimits()), Task{ID: "t", Input: "x"})
	we := wantCode(t, err, "provider_rate_limited")
	if !we.Retryable || !strings.Contains(we.Message, "aiEnvelope.generate") {
		t.Errorf("error = %+v", we)
	}
	var d struct {
		Step  string
		Cause wop.Error
	}
	if err := json.Unmarshal(we.Details, &d); err != nil || d.Step != "aiEnvelope.generate" || d.Cause.Code != "provider_rate_limited" ||
		string(d.Cause.Details) != `{"retryAfterMs":1000}` || d.Cause.Message != "slow down" {
		t.Errorf("details = %s", we.Details)
	}

	// A prompt that is not found stops the run before any generate.
	f := &fakeHost{handle: func(_ context.Context, family, method string, _ json.RawMessage) (string, error) {
		return "", wop.Errorf("prompt_not_found", "no prompt researcher-system")
	}}
	_, err = (&Runner{Host: f}).Run(context.Background(), agent(researcher(), DefaultLimits()), Task{ID: "t", Input: "x"})
	wantCode(t, err, "prompt_not_found")
	if f.count("aiEnvelope", "generate") != 0 {
		t.Error("generate called without a system prompt")
	}
}

func TestPinnedVersionChecked(t *testing.T) {
	h := &host{promptV: "4"}
	_, err := (&Runner{Host: h.fake()}).Run(context.Background(), agent(researcher(), DefaultLimits()), Task{ID: "t", Input: "x"})
	wantCode(t, err, "prompt_digest_mismatch")
}

func TestMCPErrorGoesBackToTheModel(t *testing.T) {
	h := &host{
		turns: []string{toolTurn(1, 1, tc("c", "docs__search", `{"q":1}`)), answer("gave up", 1, 1)},
		tools: func(string, json.RawMessage) (string, error) {
			return "", (&wop.Error{Code: wop.CodeMCPError, Message: "invalid params"}).WithDetails(map[string]any{"error": map[string]any{"code": -32602}})
		},
	}
	f := h.fake()
	res, err := (&Runner{Host: f}).Run(context.Background(), agent(researcher(), DefaultLimits()), Task{ID: "t", Input: "x"})
	if err != nil || res.Text != "gave up" {
		t.Fatalf("run = %+v, %v", res, err)
	}
	var second aienvelope.GenerateRequest
	_ = json.Unmarshal([]byte(f.requests("aiEnvelope", "generate")[1]), &second)
	if c := second.Messages[2].Content; !strings.Contains(c, `"isError":true`) || !strings.Contains(c, "-32602") {
		t.Errorf("tool message = %q", c)
	}
	// A transport failure ends the run with the cause.
	h = &host{
		turns: []string{toolTurn(1, 1, tc("c", "docs__search", `{}`))},
		tools: func(string, json.RawMessage) (string, error) {
			return "", wop.Errorf(wop.CodeUpstreamUnavailable, "server down").WithRetryable(true)
		},
	}
	_, err = (&Runner{Host: h.fake()}).Run(context.Background(), agent(researcher(), DefaultLimits()), Task{ID: "t", Input: "x"})
	if we := wantCode(t, err, wop.CodeUpstreamUnavailable); !we.Retryable {
		t.Error("retryable flag lost")
	}
}

func TestBadArgumentsNotSent(t *testing.T) {
	h := &host{turns: []string{toolTurn(1, 1, tc("c", "docs__search", `[1,2]`)), answer("ok", 1, 1)}}
	f := h.fake()
	if _, err := (&Runner{Host: f}).Run(context.Background(), agent(researcher(), DefaultLimits()), Task{ID: "t", Input: "x"}); err != nil {
		t.Fatal(err)
	}
	if f.count("mcp", "callTool") != 0 {
		t.Error("non-object arguments were sent")
	}
}

func TestJSONOutputAndContext(t *testing.T) {
	h := &host{turns: []string{`{"status":"completed","text":"{\"vote\":\"yes\"}","payload":{"vote":"yes"},"usage":{"inputTokens":1,"outputTokens":1}}`}}
	f := h.fake()
	m := researcher()
	m.ToolAllowlist = []string{}
	out := &aienvelope.Output{Type: "json", Schema: json.RawMessage(`{"type":"object"}`)}
	res, err := (&Runner{Host: f}).Run(context.Background(), agent(m, DefaultLimits()), Task{
		ID: "t", Input: "vote", Output: out, Context: []aienvelope.Message{{Role: "user", Content: "message from agt_x"}},
	})
	if err != nil || string(res.Payload) != `{"vote":"yes"}` {
		t.Fatalf("run = %+v, %v", res, err)
	}
	if f.count("mcp", "listTools") != 0 {
		t.Error("listTools called for an agent without tools")
	}
	var g aienvelope.GenerateRequest
	_ = json.Unmarshal([]byte(f.requests("aiEnvelope", "generate")[0]), &g)
	if g.Output == nil || g.Output.Type != "json" || len(g.Tools) != 0 || len(g.Messages) != 2 || g.Messages[0].Content != "message from agt_x" {
		t.Errorf("generate = %+v", g)
	}
}

func TestHandoffDepthAndSharedBudget(t *testing.T) {
	writer := &agentruntime.Manifest{ID: "writer", Name: "Writer", Description: "Writes.",
		SystemPromptRef: "researcher-system@3", ToolAllowlist: []string{}, Handoff: &agentruntime.Handoff{Targets: []string{"researcher"}}}
	lead := researcher()
	lead.ToolAllowlist = []string{}
	lead.Handoff = &agentruntime.Handoff{Targets: []string{"writer"}}
	h := &host{turns: []string{
		toolTurn(10, 10, tc("h", "handoff__writer", `{"task":"write it up"}`)),
		answer("draft", 5, 5),        // the writer's answer
		answer("final: draft", 1, 1), // the lead's answer
	}}
	f := h.fake()
	l := DefaultLimits()
	l.DelegationDepth = 1
	r := &Runner{Host: f, Handoff: func(_ context.Context, id string) (Agent, error) {
		if id != "writer" {
			return Agent{}, wop.Errorf(agentruntime.CodeAgentNotFound, "no agent %s", id)
		}
		return Agent{InstanceID: "agt_w", Manifest: writer, Limits: l}, nil
	}}
	res, err := r.Run(context.Background(), Agent{InstanceID: "agt_lead", Manifest: lead, Limits: l}, Task{ID: "t", Input: "report"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "final: draft" || res.Turns != 3 || res.Usage.Total() != 32 || res.ToolCalls != 1 {
		t.Fatalf("result = %+v", res)
	}
	gens := f.requests("aiEnvelope", "generate")
	var g0, g1, g2 aienvelope.GenerateRequest
	_ = json.Unmarshal([]byte(gens[0]), &g0)
	_ = json.Unmarshal([]byte(gens[1]), &g1)
	_ = json.Unmarshal([]byte(gens[2]), &g2)
	if len(g0.Tools) != 1 || g0.Tools[0].Name != "handoff__writer" {
		t.Errorf("lead offered %+v", g0.Tools)
	}
	// At depth 1 = the limit, the writer is offered no handoff back.
	if len(g1.Tools) != 0 || g1.Messages[0].Content != "write it up" || g1.IdempotencyKey != "t/handoff/1/turn/1" {
		t.Errorf("writer turn = %s", gens[1])
	}
	if g2.Messages[2].Content != "draft" {
		t.Errorf("handoff result = %+v", g2.Messages)
	}
	// The handoff's tokens count against the lead's budget: with 25
	// tokens the writer's turn already overspends it.
	l.TokenBudget = 25
	h.next = 0
	_, err = r.Run(context.Background(), Agent{InstanceID: "agt_lead", Manifest: lead, Limits: l}, Task{ID: "t2", Input: "report"})
	wantCode(t, err, agentruntime.CodeAgentBudgetExceeded)
}

func TestResolveLimits(t *testing.T) {
	i := func(v int) *int { return &v }
	i64 := func(v int64) *int64 { return &v }
	base := DefaultLimits()
	manifest := &agentruntime.Limits{Turns: i(30), ToolCalls: i(0), TimeoutMs: i64(1000)}
	spawn := &agentruntime.Limits{Turns: i(50), TokenBudget: i64(500), DelegationDepth: i(1)}
	got := Resolve(base, manifest, spawn, Limits{Turns: 25})
	want := Limits{Turns: 25, ToolCalls: 0, DelegationDepth: 1, Timeout: time.Second, TokenBudget: 500}
	if got != want {
		t.Errorf("Resolve = %+v, want %+v", got, want)
	}
	if got := Resolve(base, nil, nil, Limits{}); got != base {
		t.Errorf("Resolve with nothing = %+v", got)
	}
}

func TestToolNames(t *testing.T) {
	rn := &run{tools: map[string]toolTarget{}}
	long := strings.Repeat("x", 80)
	a := rn.uniqueName(long)
	rn.tools[a] = toolTarget{}
	b := rn.uniqueName(long)
	if len(a) != 64 || len(b) != 64 || a == b || !strings.HasSuffix(b, "_2") {
		t.Errorf("names %q %q", a, b)
	}
	if s := sanitize("my.server/tool name"); s != "my_server_tool_name" {
		t.Errorf("sanitize = %q", s)
	}
}
