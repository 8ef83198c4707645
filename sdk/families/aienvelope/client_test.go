package aienvelope

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

type recordedCall struct {
	family, method, body string
}

// fakeCaller behaves like a real wop.Caller: it marshals req and
// unmarshals a canned JSON answer into res.
type fakeCaller struct {
	calls  []recordedCall
	answer string
	err    error
}

func (f *fakeCaller) Call(_ context.Context, family, method string, req, res any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	f.calls = append(f.calls, recordedCall{family, method, string(b)})
	if f.err != nil {
		return f.err
	}
	if res != nil && f.answer != "" {
		return json.Unmarshal([]byte(f.answer), res)
	}
	return nil
}

var withAwait = map[string]json.RawMessage{"status": json.RawMessage(`"stable"`), "await": json.RawMessage(`{}`)}

func wantNotProvided(t *testing.T, err error, capability string) {
	t.Helper()
	var we *wop.Error
	if !errors.As(err, &we) {
		t.Fatalf("error = %v, want *wop.Error", err)
	}
	if we.Code != wop.CodeCapabilityNotProvided || we.Capability != capability {
		t.Fatalf("error = %q/%q, want %q/%q", we.Code, we.Capability, wop.CodeCapabilityNotProvided, capability)
	}
}

func TestNilClient(t *testing.T) {
	var c *Client
	if c.HasAwait() {
		t.Error("nil client has await")
	}
	_, err := c.Generate(context.Background(), &GenerateRequest{EnvelopeType: "x", IdempotencyKey: "k"})
	wantNotProvided(t, err, "host.aiEnvelope.generate")
	_, err = c.Await(context.Background(), &AwaitRequest{EnvelopeID: "e", TimeoutMs: 10})
	wantNotProvided(t, err, "host.aiEnvelope.await")

	if NewClient(nil, withAwait) != nil {
		t.Error("NewClient(nil) is not nil")
	}
}

func TestAwaitFacetGate(t *testing.T) {
	f := &fakeCaller{answer: `{}`}
	c := NewClient(f, map[string]json.RawMessage{"status": json.RawMessage(`"stable"`)})
	if c.HasAwait() {
		t.Fatal("HasAwait without the facet")
	}
	_, err := c.Await(context.Background(), &AwaitRequest{EnvelopeID: "e", TimeoutMs: 10})
	wantNotProvided(t, err, "host.aiEnvelope.await")
	_, err = c.Generate(context.Background(), &GenerateRequest{EnvelopeType: "x", IdempotencyKey: "k", Async: true})
	wantNotProvided(t, err, "host.aiEnvelope.await")
	if len(f.calls) != 0 {
		t.Fatalf("host called %d times, want 0", len(f.calls))
	}

	if !NewClient(f, withAwait).HasAwait() {
		t.Fatal("HasAwait false with the facet")
	}
}

func TestGenerateRequestJSON(t *testing.T) {
	tests := []struct {
		name string
		req  GenerateRequest
		want string
	}{
		{
			name: "minimal",
			req:  GenerateRequest{EnvelopeType: "summary", IdempotencyKey: "k1"},
			want: `{"envelopeType":"summary","idempotencyKey":"k1"}`,
		},
		{
			name: "full",
			req: GenerateRequest{
				EnvelopeType: "agent.turn",
				SystemPrompt: "You are {{tone}}.",
				UserMessage:  "Hi",
				Messages: []Message{
					{Role: RoleUser, Content: "find docs"},
					{Role: RoleAssistant, Content: "", ToolCalls: []ToolCall{{ID: "c1", Name: "search", Arguments: json.RawMessage(`{"q":"docs"}`)}}},
					{Role: RoleTool, Content: "3 hits", ToolCallID: "c1", Name: "search"},
				},
				Variables:      map[string]any{"tone": "terse", "n": 2},
				Provider:       "local",
				Model:          "m1",
				Temperature:    new(0.0),
				MaxTokens:      new(0),
				Stop:           []string{"\n\n"},
				Seed:           new(int64(7)),
				Output:         &Output{Type: OutputJSON, Schema: json.RawMessage(`{"type":"object"}`)},
				Tools:          []Tool{{Name: "search", Description: "Search docs", InputSchema: json.RawMessage(`{"type":"object"}`)}},
				IdempotencyKey: "k2",
				Async:          true,
			},
			want: `{"envelopeType":"agent.turn","systemPrompt":"You are {{tone}}.","userMessage":"Hi",` +
				`"messages":[{"role":"user","content":"find docs"},` +
				`{"role":"assistant","content":"","toolCalls":[{"id":"c1","name":"search","arguments":{"q":"docs"}}]},` +
				`{"role":"tool","content":"3 hits","toolCallId":"c1","name":"search"}],` +
				`"variables":{"n":2,"tone":"terse"},"provider":"local","model":"m1",` +
				`"temperature":0,"maxTokens":0,"stop":["\n\n"],"seed":7,` +
				`"output":{"type":"json","schema":{"type":"object"}},` +
				`"tools":[{"name":"search","description":"Search docs","inputSchema":{"type":"object"}}],` +
				`"idempotencyKey":"k2","async":true}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCaller{answer: `{"status":"completed"}`}
			if _, err := NewClient(f, withAwait).Generate(context.Background(), &tt.req); err != nil {
				t.Fatal(err)
			}
			if len(f.calls) != 1 {
				t.Fatalf("calls = %d, want 1", len(f.calls))
			}
			got := f.calls[0]
			if got.family != "aiEnvelope" || got.method != "generate" {
				t.Errorf("called %s.%s, want aiEnvelope.generate", got.family, got.method)
			}
			if got.body != tt.want {
				t.Errorf("body\n got %s\nwant %s", got.body, tt.want)
			}
		})
	}
}

func TestAwait(t *testing.T) {
	f := &fakeCaller{answer: `{"envelopeId":"env_1","status":"pending","timedOut":true}`}
	res, err := NewClient(f, withAwait).Await(context.Background(), &AwaitRequest{EnvelopeID: "env_1", TimeoutMs: 500})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.calls[0], (recordedCall{"aiEnvelope", "await", `{"envelopeId":"env_1","timeoutMs":500}`}); got != want {
		t.Errorf("call = %+v, want %+v", got, want)
	}
	if res.EnvelopeID != "env_1" || res.Status != StatusPending || !res.TimedOut {
		t.Errorf("result = %+v", res)
	}
}

func TestGenerateResultUnmarshal(t *testing.T) {
	f := &fakeCaller{answer: `{"envelopeType":"verdict","envelopeId":"env_2","status":"completed",
		"payload":{"ok":true},"text":"{\"ok\":true}",
		"toolCalls":[{"id":"c1","name":"search","arguments":{"q":"x"}}],
		"finishReason":"stop","usage":{"inputTokens":12,"outputTokens":3},
		"model":"m1","provider":"local","warnings":[{"code":"unsupported_setting","message":"seed ignored"}]}`}
	res, err := NewClient(f, nil).Generate(context.Background(), &GenerateRequest{EnvelopeType: "verdict", IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if res.EnvelopeType != "verdict" || res.EnvelopeID != "env_2" || res.Status != StatusCompleted ||
		string(res.Payload) != `{"ok":true}` || res.Text != `{"ok":true}` || res.FinishReason != "stop" ||
		res.Usage != (Usage{InputTokens: 12, OutputTokens: 3}) || res.Model != "m1" || res.Provider != "local" {
		t.Errorf("result = %+v", res)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].ID != "c1" || string(res.ToolCalls[0].Arguments) != `{"q":"x"}` {
		t.Errorf("toolCalls = %+v", res.ToolCalls)
	}
	if len(res.Warnings) != 1 || res.Warnings[0].Code != "unsupported_setting" {
		t.Errorf("warnings = %+v", res.Warnings)
	}
}

func TestGenerateResultMarshal(t *testing.T) {
	tests := []struct {
		name string
		res  GenerateResult
		want string
	}{
		{
			name: "completed without warnings",
			res: GenerateResult{EnvelopeType: "t", EnvelopeID: "e", Status: StatusCompleted, Payload: json.RawMessage(`"hi"`),
				Text: "hi", FinishReason: "stop", Usage: Usage{InputTokens: 1, OutputTokens: 2}, Model: "m", Provider: "p"},
			want: `{"envelopeType":"t","envelopeId":"e","status":"completed","payload":"hi","text":"hi","finishReason":"stop",` +
				`"usage":{"inputTokens":1,"outputTokens":2},"model":"m","provider":"p","warnings":[]}`,
		},
		{
			name: "pending from generate",
			res:  GenerateResult{EnvelopeType: "t", EnvelopeID: "e", Status: StatusPending},
			want: `{"envelopeType":"t","envelopeId":"e","status":"pending"}`,
		},
		{
			name: "pending from await",
			res:  GenerateResult{EnvelopeID: "e", Status: StatusPending, TimedOut: true},
			want: `{"envelopeId":"e","status":"pending","timedOut":true}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, v := range []any{tt.res, &tt.res} {
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				if string(b) != tt.want {
					t.Errorf("%T\n got %s\nwant %s", v, b, tt.want)
				}
			}
		})
	}
}

func TestCallerErrorUnchanged(t *testing.T) {
	want := &wop.Error{Code: CodeProviderRateLimited, Message: "slow down", Retryable: true, Details: json.RawMessage(`{"retryAfterMs":1000}`)}
	f := &fakeCaller{err: want}
	c := NewClient(f, withAwait)
	if _, err := c.Generate(context.Background(), &GenerateRequest{EnvelopeType: "x", IdempotencyKey: "k"}); err != want {
		t.Errorf("Generate error = %#v, want %#v", err, want)
	}
	if _, err := c.Await(context.Background(), &AwaitRequest{EnvelopeID: "e"}); err != want {
		t.Errorf("Await error = %#v, want %#v", err, want)
	}
}

func TestNilRequest(t *testing.T) {
	f := &fakeCaller{}
	c := NewClient(f, withAwait)
	if _, err := c.Generate(context.Background(), nil); wop.CodeOf(err) != wop.CodeValidation {
		t.Errorf("Generate(nil) = %v, want validation_error", err)
	}
	if _, err := c.Await(context.Background(), nil); wop.CodeOf(err) != wop.CodeValidation {
		t.Errorf("Await(nil) = %v, want validation_error", err)
	}
	if len(f.calls) != 0 {
		t.Errorf("host called %d times, want 0", len(f.calls))
	}
}
