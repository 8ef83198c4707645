package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wophost/wophost/plugins/agentrt/loop"
	"github.com/wophost/wophost/plugins/agentrt/store"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/wop"
)

// model answers generate for each agent instance from a function of the
// request; it knows the agent from the call context's Caller, as the host
// would.
type model struct {
	mu     sync.Mutex
	gens   []gen
	answer func(agent string, req genReq) (string, error)
}

type gen struct {
	agent string
	req   genReq
}

type genReq struct {
	SystemPrompt string `json:"systemPrompt"`
	Messages     []struct {
		Role, Content string
	} `json:"messages"`
	Output *struct {
		Type string `json:"type"`
	} `json:"output"`
	IdempotencyKey string `json:"idempotencyKey"`
}

func (m *model) Call(ctx context.Context, family, method string, req, res any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	cc, _ := wop.CallContextFrom(ctx)
	agent, _, _ := strings.Cut(strings.TrimPrefix(cc.Caller, "agent:"), "@")
	var out string
	switch family + "." + method {
	case "promptLibrary.get":
		out = `{"promptId":"p@1","name":"p","version":"1","digest":"sha256:00","systemPrompt":"Be helpful.","raw":"Be helpful."}`
	case "aiEnvelope.generate":
		var g genReq
		if err := json.Unmarshal(b, &g); err != nil {
			return err
		}
		m.mu.Lock()
		m.gens = append(m.gens, gen{agent, g})
		m.mu.Unlock()
		out, err = m.answer(agent, g)
		if err != nil {
			return err
		}
	default:
		return wop.NotProvided("host." + family + "." + method)
	}
	return json.Unmarshal([]byte(out), res)
}

func (m *model) calls() []gen {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]gen(nil), m.gens...)
}

func text(s string) string {
	return fmt.Sprintf(`{"status":"completed","text":%q,"payload":null,"usage":{"inputTokens":1,"outputTokens":1}}`, s)
}

func voteAnswer(v string) string {
	return fmt.Sprintf(`{"status":"completed","text":"","payload":{"vote":%s,"rationale":"r"},"usage":{"inputTokens":1,"outputTokens":1}}`, v)
}

func manifest(id, desc string, skills ...string) json.RawMessage {
	var sk []map[string]any
	for _, s := range skills {
		sk = append(sk, map[string]any{"id": s})
	}
	b, _ := json.Marshal(map[string]any{
		"id": id, "name": id, "description": desc, "systemPromptRef": "p@1", "toolAllowlist": []string{}, "skills": sk,
	})
	return b
}

func newService(t *testing.T, path string, s Settings) *Service {
	t.Helper()
	st, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return New(st, s)
}

func spawn(t *testing.T, svc *Service, key string, m json.RawMessage) string {
	t.Helper()
	res, err := svc.Spawn(context.Background(), &agentruntime.SpawnRequest{Manifest: m, IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return res.AgentInstanceID
}

type loopResult = loop.Result

func code(err error) string { return wop.CodeOf(err) }

func TestSpawn(t *testing.T) {
	ctx := context.Background()
	settings := DefaultSettings()
	settings.SpawnQuota = 2
	svc := newService(t, filepath.Join(t.TempDir(), "a.db"), settings)
	m := manifest("writer", "Writes prose.")
	res, err := svc.Spawn(ctx, &agentruntime.SpawnRequest{ManifestID: "writer", Manifest: m, IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	parsed, _ := agentruntime.ParseManifest(m)
	if d, _ := parsed.Digest(); res.ManifestDigest != d || !strings.HasPrefix(res.AgentInstanceID, "agt_") {
		t.Fatalf("spawn = %+v, digest %s", res, d)
	}
	again, err := svc.Spawn(ctx, &agentruntime.SpawnRequest{Manifest: m, IdempotencyKey: "k1"})
	if err != nil || again.AgentInstanceID != res.AgentInstanceID {
		t.Fatalf("repeated spawn = %+v, %v", again, err)
	}
	cases := []struct {
		name string
		req  agentruntime.SpawnRequest
		code string
		text string
	}{
		{"key reused", agentruntime.SpawnRequest{Manifest: m, Config: json.RawMessage(`{"limits":{"turns":2}}`), IdempotencyKey: "k1"}, wop.CodeIdempotencyKeyMismatch, ""},
		{"id only", agentruntime.SpawnRequest{ManifestID: "writer", IdempotencyKey: "k2"}, agentruntime.CodeAgentNotFound, "host passes"},
		{"nothing", agentruntime.SpawnRequest{IdempotencyKey: "k2"}, wop.CodeValidation, "manifest"},
		{"no key", agentruntime.SpawnRequest{Manifest: m}, wop.CodeValidation, "idempotencyKey"},
		{"id mismatch", agentruntime.SpawnRequest{ManifestID: "other", Manifest: m, IdempotencyKey: "k2"}, wop.CodeValidation, "manifestId"},
		{"bad manifest", agentruntime.SpawnRequest{Manifest: json.RawMessage(`{"id":"x","name":"x","description":"d","systemPromptRef":"p","toolAllowlist":[]}`), IdempotencyKey: "k2"}, wop.CodeValidation, "/systemPromptRef"},
		{"bad config", agentruntime.SpawnRequest{Manifest: m, Config: json.RawMessage(`{"limitz":{}}`), IdempotencyKey: "k2"}, wop.CodeValidation, "config"},
		{"bad limits", agentruntime.SpawnRequest{Manifest: m, Config: json.RawMessage(`{"limits":{"turns":0}}`), IdempotencyKey: "k2"}, wop.CodeValidation, "config/limits/turns"},
	}
	for _, c := range cases {
		_, err := svc.Spawn(ctx, &c.req)
		if code(err) != c.code || !strings.Contains(fmt.Sprint(err), c.text) {
			t.Errorf("%s: error = %v, want %s containing %q", c.name, err, c.code, c.text)
		}
	}
	var we *wop.Error
	_, err = svc.Spawn(ctx, &agentruntime.SpawnRequest{Manifest: json.RawMessage(`{"id":"x","name":"x","description":"d","systemPromptRef":"p@1","toolAllowlist":["bad"]}`), IdempotencyKey: "k2"})
	if !errors.As(err, &we) || !strings.Contains(string(we.Details), `"pointer":"/manifest/toolAllowlist/0"`) {
		t.Errorf("manifest problem details = %v", err)
	}
	spawn(t, svc, "k3", manifest("reader", "Reads."))
	if _, err := svc.Spawn(ctx, &agentruntime.SpawnRequest{Manifest: m, IdempotencyKey: "k4"}); code(err) != agentruntime.CodeAgentSpawnQuotaExhausted {
		t.Errorf("over quota: %v", err)
	}
}

func TestDelegateBestMatchAndEscalation(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, filepath.Join(t.TempDir(), "a.db"), DefaultSettings())
	writer := spawn(t, svc, "w", manifest("writer", "Writes clear prose.", "copy-editing"))
	researcher := spawn(t, svc, "r", manifest("researcher", "Finds sources.", "literature-search"))
	m := &model{answer: func(agent string, _ genReq) (string, error) { return text("answer from " + agent), nil }}

	res, err := svc.Delegate(ctx, m, &agentruntime.DelegateRequest{Task: json.RawMessage(`"search the literature on agents"`), Agents: []string{writer, researcher}})
	if err != nil {
		t.Fatal(err)
	}
	if res.SelectedAgentID != researcher || res.Status != "completed" || string(res.Output) != `"answer from `+researcher+`"` || res.Escalated {
		t.Fatalf("delegate = %+v", res)
	}
	calls := m.calls()
	if len(calls) != 1 || calls[0].agent != researcher || calls[0].req.Messages[0].Content != "search the literature on agents" ||
		calls[0].req.SystemPrompt != "Be helpful." || calls[0].req.IdempotencyKey != res.DelegationID+"/turn/1" {
		t.Errorf("generate = %+v", calls)
	}
	task, err := svc.store.Task(ctx, res.DelegationID)
	if err != nil || task.Status != store.TaskCompleted || task.InstanceID != researcher {
		t.Errorf("task = %+v, %v", task, err)
	}

	// Nothing matches well enough: escalated, no agent runs.
	threshold := 0.5
	res, err = svc.Delegate(ctx, m, &agentruntime.DelegateRequest{Task: json.RawMessage(`{"q":"bake bread"}`), Agents: []string{writer, researcher}, EscalationThreshold: &threshold})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentruntime.StatusEscalated || !res.Escalated || res.SelectedAgentID != writer || res.Output != nil || len(m.calls()) != 1 {
		t.Fatalf("escalated delegate = %+v (generate calls %d)", res, len(m.calls()))
	}
	// A good enough match is not escalated.
	res, err = svc.Delegate(ctx, m, &agentruntime.DelegateRequest{Task: json.RawMessage(`"copy editing"`), Agents: []string{writer, researcher}, EscalationThreshold: &threshold})
	if err != nil || res.Escalated || res.SelectedAgentID != writer {
		t.Fatalf("delegate = %+v, %v", res, err)
	}

	bad := []struct {
		req  agentruntime.DelegateRequest
		code string
		text string
	}{
		{agentruntime.DelegateRequest{Task: json.RawMessage(`"x"`), Agents: []string{writer, "agt_nope"}}, agentruntime.CodeAgentNotFound, "agents/1"},
		{agentruntime.DelegateRequest{Task: json.RawMessage(`"x"`)}, wop.CodeValidation, "agents"},
		{agentruntime.DelegateRequest{Task: json.RawMessage(`"x"`), Agents: []string{writer, writer}}, wop.CodeValidation, "agents/1"},
		{agentruntime.DelegateRequest{Agents: []string{writer}}, wop.CodeValidation, "task"},
		{agentruntime.DelegateRequest{Task: json.RawMessage(`"x"`), Agents: []string{writer}, Strategy: "random"}, wop.CodeValidation, "strategy"},
		{agentruntime.DelegateRequest{Task: json.RawMessage(`"x"`), Agents: []string{writer}, EscalationThreshold: new(1.5)}, wop.CodeValidation, "escalationThreshold"},
	}
	for _, b := range bad {
		if _, err := svc.Delegate(ctx, m, &b.req); code(err) != b.code || !strings.Contains(fmt.Sprint(err), b.text) {
			t.Errorf("Delegate(%+v) = %v, want %s about %s", b.req, err, b.code, b.text)
		}
	}
}

func TestDelegateLoadBalanced(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, filepath.Join(t.TempDir(), "a.db"), DefaultSettings())
	a := spawn(t, svc, "a", manifest("a", "Agent a."))
	b := spawn(t, svc, "b", manifest("b", "Agent b."))
	c := spawn(t, svc, "c", manifest("c", "Agent c."))
	// a has two queued messages, b one, c one: b wins the tie with c.
	for i, to := range []string{a, a, b, c} {
		if _, err := svc.MessageSend(ctx, &agentruntime.MessageSendRequest{FromAgentID: "pack", ToAgentID: to, Channel: "work",
			Content: json.RawMessage(`"job"`), IdempotencyKey: fmt.Sprint("k", i)}); err != nil {
			t.Fatal(err)
		}
	}
	m := &model{answer: func(string, genReq) (string, error) { return text("done"), nil }}
	res, err := svc.Delegate(ctx, m, &agentruntime.DelegateRequest{Task: json.RawMessage(`"anything"`), Agents: []string{a, b, c}, Strategy: "load-balanced"})
	if err != nil || res.SelectedAgentID != b {
		t.Fatalf("delegate = %+v, %v; want %s", res, err, b)
	}
	// b consumed its message; now b and c... c has 1, b has 0.
	res, err = svc.Delegate(ctx, m, &agentruntime.DelegateRequest{Task: json.RawMessage(`"anything"`), Agents: []string{a, c, b}, Strategy: "load-balanced"})
	if err != nil || res.SelectedAgentID != b {
		t.Fatalf("second delegate = %+v, %v; want %s", res, err, b)
	}
}

func TestMailboxDeliveredInOrderAndReleasedOnFailure(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	svc := newService(t, path, DefaultSettings())
	to := spawn(t, svc, "to", manifest("worker", "Works."))
	send := func(from, key, content string) {
		t.Helper()
		if _, err := svc.MessageSend(ctx, &agentruntime.MessageSendRequest{FromAgentID: from, ToAgentID: to, Channel: "review",
			Content: json.RawMessage(content), IdempotencyKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	send("agt_x", "1", `{"n":1}`)
	send("agt_y", "2", `{"n":2}`)
	send("agt_x", "3", `{"n":3}`)

	fail := true
	m := &model{answer: func(string, genReq) (string, error) {
		if fail {
			return "", wop.Errorf("provider_unavailable", "down").WithRetryable(true)
		}
		return text("read them"), nil
	}}
	_, err := svc.Delegate(ctx, m, &agentruntime.DelegateRequest{Task: json.RawMessage(`"go"`), Agents: []string{to}})
	if code(err) != "provider_unavailable" {
		t.Fatalf("failing delegate: %v", err)
	}
	if n, _ := svc.store.Queued(ctx, to); n != 3 {
		t.Fatalf("after a failed run %d messages queued, want 3", n)
	}

	// A restart in between: the messages are on disk.
	svc.store.Close()
	svc = newService(t, path, DefaultSettings())
	fail = false
	if _, err := svc.Delegate(ctx, m, &agentruntime.DelegateRequest{Task: json.RawMessage(`"go"`), Agents: []string{to}}); err != nil {
		t.Fatal(err)
	}
	calls := m.calls()
	msgs := calls[len(calls)-1].req.Messages
	if len(msgs) != 4 {
		t.Fatalf("messages = %+v", msgs)
	}
	for i, want := range []string{`from agt_x on channel "review":` + "\n" + `{"n":1}`, `from agt_y on channel "review":` + "\n" + `{"n":2}`, `from agt_x on channel "review":` + "\n" + `{"n":3}`} {
		if !strings.Contains(msgs[i].Content, want) {
			t.Errorf("message %d = %q, want %q", i, msgs[i].Content, want)
		}
	}
	if msgs[3].Content != "go" {
		t.Errorf("task message = %q", msgs[3].Content)
	}
	if n, _ := svc.store.Queued(ctx, to); n != 0 {
		t.Errorf("after a successful run %d messages queued", n)
	}
}

func TestMessageSend(t *testing.T) {
	ctx := context.Background()
	settings := DefaultSettings()
	settings.MailboxCapacity = 2
	settings.MaxMessageBytes = 32
	svc := newService(t, filepath.Join(t.TempDir(), "a.db"), settings)
	to := spawn(t, svc, "to", manifest("worker", "Works."))
	req := func(key, content string) *agentruntime.MessageSendRequest {
		return &agentruntime.MessageSendRequest{FromAgentID: "agt_x", ToAgentID: to, Channel: "c", Content: json.RawMessage(content), IdempotencyKey: key}
	}
	first, err := svc.MessageSend(ctx, req("a", `{ "x" : 1 }`))
	if err != nil || !strings.HasPrefix(first.MessageID, "msg_") {
		t.Fatalf("send = %+v, %v", first, err)
	}
	// Whitespace does not make a different message.
	dup, err := svc.MessageSend(ctx, req("a", `{"x":1}`))
	if err != nil || dup.MessageID != first.MessageID || !dup.SentAt.Equal(first.SentAt) {
		t.Fatalf("resend = %+v, %v", dup, err)
	}
	if _, err := svc.MessageSend(ctx, req("a", `{"x":2}`)); code(err) != wop.CodeIdempotencyKeyMismatch {
		t.Errorf("reused key: %v", err)
	}
	if _, err := svc.MessageSend(ctx, req("b", `2`)); err != nil {
		t.Fatal(err)
	}
	_, err = svc.MessageSend(ctx, req("c", `3`))
	var we *wop.Error
	if !errors.As(err, &we) || we.Code != agentruntime.CodeMailboxFull || !we.Retryable {
		t.Errorf("full mailbox: %v", err)
	}
	bad := []struct {
		r     *agentruntime.MessageSendRequest
		field string
	}{
		{&agentruntime.MessageSendRequest{ToAgentID: to, Channel: "c", Content: json.RawMessage(`1`), IdempotencyKey: "k"}, "fromAgentId"},
		{&agentruntime.MessageSendRequest{FromAgentID: "x", Channel: "c", Content: json.RawMessage(`1`), IdempotencyKey: "k"}, "toAgentId"},
		{&agentruntime.MessageSendRequest{FromAgentID: "x", ToAgentID: to, Content: json.RawMessage(`1`), IdempotencyKey: "k"}, "channel"},
		{&agentruntime.MessageSendRequest{FromAgentID: "x", ToAgentID: to, Channel: "c", Content: json.RawMessage(`1`)}, "idempotencyKey"},
		{&agentruntime.MessageSendRequest{FromAgentID: "x", ToAgentID: to, Channel: "c", IdempotencyKey: "k"}, "content"},
		{req("z", `"`+strings.Repeat("x", 40)+`"`), "content"},
	}
	for _, b := range bad {
		if _, err := svc.MessageSend(ctx, b.r); code(err) != wop.CodeValidation || !strings.Contains(err.Error(), b.field) {
			t.Errorf("MessageSend(%+v) = %v, want validation_error about %s", b.r, err, b.field)
		}
	}
	if _, err := svc.MessageSend(ctx, &agentruntime.MessageSendRequest{FromAgentID: "x", ToAgentID: "agt_nope", Channel: "c",
		Content: json.RawMessage(`1`), IdempotencyKey: "k"}); code(err) != agentruntime.CodeAgentNotFound {
		t.Errorf("unknown recipient: %v", err)
	}
}

func TestConsensus(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, filepath.Join(t.TempDir(), "a.db"), DefaultSettings())
	a := spawn(t, svc, "a", manifest("optimist", "Says yes."))
	b := spawn(t, svc, "b", manifest("skeptic", "Doubts first."))
	round := map[string]int{}
	var mu sync.Mutex
	m := &model{answer: func(agent string, g genReq) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		round[agent]++
		if agent == b && round[agent] == 1 {
			return voteAnswer(`"no"`), nil // the skeptic comes round in the second round
		}
		return voteAnswer(`"yes"`), nil
	}}
	res, err := svc.Consensus(ctx, m, &agentruntime.ConsensusRequest{Proposal: json.RawMessage(`{"ship":"v2"}`), Participants: []string{a, b},
		Strategy: "unanimous", MaxRounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Converged || res.Rounds != 2 || string(res.Decision) != `"yes"` || len(res.Ballots) != 2 || res.Ballots[1].AgentID != b {
		t.Fatalf("consensus = %+v", res)
	}
	calls := m.calls()
	if len(calls) != 3 {
		t.Fatalf("generate calls = %d, want 3 (a, b, then b again)", len(calls))
	}
	last := calls[2]
	if last.agent != b || last.req.Output == nil || last.req.Output.Type != "json" {
		t.Errorf("debate call = %+v", last)
	}
	prompt := last.req.Messages[len(last.req.Messages)-1].Content
	if !strings.Contains(prompt, `{"ship":"v2"}`) || !strings.Contains(prompt, `participant 0: vote "yes"`) ||
		!strings.Contains(prompt, `participant 1 (yours): vote "no"`) {
		t.Errorf("debate prompt = %q", prompt)
	}

	if _, err := svc.Consensus(ctx, m, &agentruntime.ConsensusRequest{Proposal: json.RawMessage(`1`), Participants: []string{a}, MaxRounds: 99}); code(err) != wop.CodeValidation {
		t.Errorf("maxRounds over the cap: %v", err)
	}
	if _, err := svc.Consensus(ctx, m, &agentruntime.ConsensusRequest{Proposal: json.RawMessage(`1`), Participants: []string{a}, Strategy: "quorum"}); code(err) != wop.CodeValidation {
		t.Errorf("quorum without threshold: %v", err)
	}
	if _, err := svc.Consensus(ctx, m, &agentruntime.ConsensusRequest{Proposal: json.RawMessage(`1`), Participants: []string{a, "agt_nope"}}); code(err) != agentruntime.CodeAgentNotFound {
		t.Errorf("unknown participant: %v", err)
	}

	// Every participant failing is consensus_failed.
	down := &model{answer: func(string, genReq) (string, error) { return "", wop.Errorf("provider_unavailable", "down") }}
	if _, err := svc.Consensus(ctx, down, &agentruntime.ConsensusRequest{Proposal: json.RawMessage(`1`), Participants: []string{a, b}}); code(err) != agentruntime.CodeConsensusFailed {
		t.Errorf("all failing: %v", err)
	}
}

func TestParseVote(t *testing.T) {
	cases := []struct {
		payload, text, vote, rationale string
		err                            bool
	}{
		{`{"vote":{"pick":2},"rationale":"best"}`, "", `{"pick":2}`, "best", false},
		{"", `{"vote":"yes"}`, `"yes"`, "", false},
		{"", "  Yes  ", `"Yes"`, "", false},
		{"", " ", "", "", true},
	}
	for _, c := range cases {
		v, r, err := parseVote(&loopResult{Payload: json.RawMessage(c.payload), Text: c.text})
		if (err != nil) != c.err || string(v) != c.vote || r != c.rationale {
			t.Errorf("parseVote(%q, %q) = %s, %q, %v", c.payload, c.text, v, r, err)
		}
	}
}

// An aiEnvelope callback that fails with unavailable (the plugin
// restarting under a turn) makes delegate and consensus fail retryable at
// the top, with the failure under details.cause; a permanent failure
// stays permanent.
func TestTransientCallbackFailureIsRetryableAtTheTop(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, filepath.Join(t.TempDir(), "a.db"), DefaultSettings())
	a := spawn(t, svc, "a", manifest("optimist", "Says yes."))
	b := spawn(t, svc, "b", manifest("skeptic", "Doubts first."))

	unavailable := wop.Errorf(wop.CodeUnavailable, "host.aiEnvelope.generate: the plugin went away during the call").
		WithCapability("host.aiEnvelope.generate").WithRetryable(true)
	tests := []struct {
		name      string
		err       *wop.Error
		retryable bool
	}{
		{"unavailable", unavailable, true},
		{"unavailable without its flag", wop.Errorf(wop.CodeUnavailable, "down"), true},
		// A family error built by hand around unavailable, its flag false.
		{"a family error wrapping unavailable", (&wop.Error{Code: "acme.gateway_failed", Message: "gateway failed"}).
			WithDetails(map[string]any{"cause": unavailable}), true},
		{"a permanent failure", wop.Errorf("provider_auth_failed", "bad key"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &model{answer: func(string, genReq) (string, error) { return "", tt.err }}

			_, err := svc.Delegate(ctx, m, &agentruntime.DelegateRequest{Task: json.RawMessage(`"say yes"`), Agents: []string{a}})
			we := wop.AsError(err)
			if we == nil || we.Code != tt.err.Code || we.Retryable != tt.retryable {
				t.Errorf("delegate = %#v, want code %s retryable %v", we, tt.err.Code, tt.retryable)
			} else {
				wantCause(t, we, tt.err)
			}

			_, err = svc.Consensus(ctx, m, &agentruntime.ConsensusRequest{Proposal: json.RawMessage(`1`), Participants: []string{a, b}})
			we = wop.AsError(err)
			if we == nil || we.Code != agentruntime.CodeConsensusFailed || we.Retryable != tt.retryable {
				t.Fatalf("consensus = %#v, want consensus_failed retryable %v", we, tt.retryable)
			}
			// consensus_failed → the agent's failure → the callback's.
			var d struct{ Cause *wop.Error }
			if err := json.Unmarshal(we.Details, &d); err != nil || d.Cause == nil {
				t.Fatalf("consensus details = %s", we.Details)
			}
			if d.Cause.Code != tt.err.Code || d.Cause.Retryable != tt.retryable {
				t.Errorf("consensus cause = %#v", d.Cause)
			}
			wantCause(t, d.Cause, tt.err)
		})
	}
}

// wantCause checks that we carries orig, unaltered, under details.cause.
func wantCause(t *testing.T, we, orig *wop.Error) {
	t.Helper()
	var d struct{ Cause json.RawMessage }
	if err := json.Unmarshal(we.Details, &d); err != nil {
		t.Fatalf("details %s: %v", we.Details, err)
	}
	want, _ := json.Marshal(orig)
	if string(d.Cause) != string(want) {
		t.Errorf("details.cause = %s, want %s", d.Cause, want)
	}
}
