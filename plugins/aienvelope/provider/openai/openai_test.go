package openai

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/plugins/aienvelope/internal/wiretest"
	"github.com/wophost/wophost/plugins/aienvelope/provider"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/wop"
)

const secret = "sk-proj-wophostTESTSECRET0123456789"

func newProvider(url string, window int) *Provider {
	return New(Config{BaseURL: url + "/v1", APIKey: secret, Model: "fixture-model", ContextWindow: window, Timeout: 30 * time.Second})
}

func simpleRequest() *provider.Request {
	return &provider.Request{System: "Be brief.", Messages: []aienvelope.Message{{Role: aienvelope.RoleUser, Content: "Capital of France?"}}}
}

func TestSuccessFixtures(t *testing.T) {
	tests := []struct {
		fixture, text, finish, model string
		usage                        aienvelope.Usage
		tools                        []aienvelope.ToolCall
		window                       int
		warn                         string
	}{
		{fixture: "openai_success", text: "Paris is the capital of France.", finish: "stop", model: "gpt-4o-mini-2024-07-18", usage: aienvelope.Usage{InputTokens: 24, OutputTokens: 8}},
		{fixture: "openai_tool_calls", finish: "tool_calls", model: "gpt-4o-mini-2024-07-18", usage: aienvelope.Usage{InputTokens: 81, OutputTokens: 19},
			tools: []aienvelope.ToolCall{{ID: "call_Vb8q0mBzL1dQ2pX7sK4tR9aE", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris, France","unit":"celsius"}`)}}},
		{fixture: "ollama_success", text: "The sky appears blue because of Rayleigh scattering.", finish: "stop", model: "llama3.2", usage: aienvelope.Usage{InputTokens: 31, OutputTokens: 11}, window: 4096},
		{fixture: "ollama_truncated", text: "Based on the end of the document, the summary is...", finish: "stop", model: "llama3.2", usage: aienvelope.Usage{InputTokens: 4096, OutputTokens: 38}, window: 4096, warn: provider.WarnPossibleTruncation},
		{fixture: "ollama_tool_calls", finish: "tool_calls", model: "llama3.2", usage: aienvelope.Usage{InputTokens: 168, OutputTokens: 17},
			tools: []aienvelope.ToolCall{{ID: "call_8ehx3vq1", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Toronto"}`)}}},
		{fixture: "vllm_success", text: "Hello! How can I help you today?", finish: "stop", model: "meta-llama/Llama-3.1-8B-Instruct", usage: aienvelope.Usage{InputTokens: 42, OutputTokens: 10}},
		{fixture: "llamacpp_success", text: "Once upon a time, in a quiet village by the sea, there lived", finish: "length", model: "gpt-3.5-turbo", usage: aienvelope.Usage{InputTokens: 27, OutputTokens: 16}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := wiretest.NewServer(t, tt.fixture)
			got, err := newProvider(srv.URL, tt.window).Generate(context.Background(), simpleRequest())
			if err != nil {
				t.Fatal(err)
			}
			if got.Text != tt.text || got.FinishReason != tt.finish || got.Model != tt.model || got.Usage != tt.usage {
				t.Errorf("got %+v", got)
			}
			if len(got.ToolCalls) != len(tt.tools) {
				t.Fatalf("tool calls %+v, want %+v", got.ToolCalls, tt.tools)
			}
			for i, tc := range tt.tools {
				g := got.ToolCalls[i]
				if g.ID != tc.ID || g.Name != tc.Name || string(g.Arguments) != string(tc.Arguments) {
					t.Errorf("tool call %d = %+v (%s), want %+v", i, g, g.Arguments, tc)
				}
			}
			if tt.warn == "" && len(got.Warnings) > 0 || tt.warn != "" && (len(got.Warnings) != 1 || got.Warnings[0].Code != tt.warn) {
				t.Errorf("warnings %+v, want %q", got.Warnings, tt.warn)
			}
		})
	}
}

func TestErrorFixtures(t *testing.T) {
	tests := []struct {
		fixture   string
		code      string
		retryable bool
		after     time.Duration
		status    int
	}{
		{"openai_401_invalid_key", aienvelope.CodeProviderAuthFailed, false, 0, 401},
		{"openai_429_rate_limit", aienvelope.CodeProviderRateLimited, true, 120 * time.Millisecond, 429},
		{"openai_429_insufficient_quota", aienvelope.CodeProviderQuotaExhausted, false, 0, 429},
		{"openai_400_context_length", aienvelope.CodeContextLengthExceeded, false, 0, 400},
		{"openai_500_server_error", aienvelope.CodeProviderUnavailable, true, 0, 500},
		{"openai_503_overloaded", aienvelope.CodeProviderUnavailable, true, 0, 503},
		{"ollama_404_model", "validation_error", false, 0, 404},
		{"vllm_400_context_length", aienvelope.CodeContextLengthExceeded, false, 0, 400},
		{"vllm_400_context_length_nested", aienvelope.CodeContextLengthExceeded, false, 0, 400},
		{"llamacpp_400_exceed_context", aienvelope.CodeContextLengthExceeded, false, 0, 400},
		{"llamacpp_500_exceed_context", aienvelope.CodeContextLengthExceeded, false, 0, 500},
		{"llamacpp_503_loading", aienvelope.CodeProviderUnavailable, true, 0, 503},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := wiretest.NewServer(t, tt.fixture)
			_, err := newProvider(srv.URL, 0).Generate(context.Background(), simpleRequest())
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *provider.Error", err)
			}
			if pe.Code != tt.code || pe.Retryable != tt.retryable || pe.After != tt.after || pe.HTTPStatus != tt.status {
				t.Errorf("got code=%s retryable=%t after=%v status=%d (%s)", pe.Code, pe.Retryable, pe.After, pe.HTTPStatus, pe.Message)
			}
			we := pe.WOP()
			if we.Code != tt.code || we.Retryable != tt.retryable {
				t.Errorf("envelope %+v", we)
			}
			if tt.after > 0 && !strings.Contains(string(we.Details), `"retryAfterMs":120`) {
				t.Errorf("details %s lack retryAfterMs", we.Details)
			}
			if strings.Contains(we.Error()+string(we.Details), "Xq7T") || strings.Contains(we.Error(), secret) {
				t.Errorf("a key leaked into the error: %s", we.Error())
			}
		})
	}
}

func TestRequestOnTheWire(t *testing.T) {
	srv := wiretest.NewServer(t, "openai_json_schema")
	temp, seed, maxT := 0.2, int64(7), 64
	req := &provider.Request{
		System: "sys",
		Messages: []aienvelope.Message{
			{Role: aienvelope.RoleUser, Content: "weather?"},
			{Role: aienvelope.RoleAssistant, ToolCalls: []aienvelope.ToolCall{{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{"location": "Paris"}`)}}},
			{Role: aienvelope.RoleTool, ToolCallID: "c1", Content: "18C"},
		},
		Model: "override", Temperature: &temp, Seed: &seed, MaxTokens: &maxT, Stop: []string{"END"},
		Output: &aienvelope.Output{Type: aienvelope.OutputJSON, Schema: json.RawMessage(`{"type":"object"}`)},
		Tools:  []aienvelope.Tool{{Name: "get_weather", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)}},
	}
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	callCtx := wop.WithCallContext(context.Background(), wop.CallContext{RunID: "run_1", Traceparent: traceparent})
	got, err := newProvider(srv.URL, 0).Generate(callCtx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != `{"verdict":"approve","confidence":0.92}` {
		t.Errorf("text %q", got.Text)
	}
	r := srv.Requests()[0]
	if r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer "+secret {
		t.Errorf("path %s auth %q", r.Path, r.Header.Get("Authorization"))
	}
	if r.Header.Get("traceparent") != traceparent {
		t.Errorf("traceparent header %q, want the call's", r.Header.Get("traceparent"))
	}
	want := `{"model":"override","messages":[{"role":"system","content":"sys"},{"role":"user","content":"weather?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Paris\"}"}}]},` +
		`{"role":"tool","content":"18C","tool_call_id":"c1"}],"temperature":0.2,"max_tokens":64,"stop":["END"],"seed":7,` +
		`"tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object"}}}],` +
		`"response_format":{"json_schema":{"name":"envelope","schema":{"type":"object"}},"type":"json_schema"}}`
	if string(r.Body) != want {
		t.Errorf("body\n got %s\nwant %s", r.Body, want)
	}
}

func TestUnreachableIsRetryableUnavailable(t *testing.T) {
	srv := wiretest.NewServer(t, "openai_success")
	url := srv.URL
	srv.Close()
	_, err := newProvider(url, 0).Generate(context.Background(), simpleRequest())
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Code != aienvelope.CodeProviderUnavailable || !pe.Retryable {
		t.Fatalf("got %v", err)
	}
}

func TestMalformedAnswerIsUnavailable(t *testing.T) {
	srv := wiretest.NewServer(t, "openai_success")
	p := newProvider(srv.URL, 0)
	if _, err := p.decode(simpleRequest(), []byte(`{"choices":`)); err == nil {
		t.Fatal("truncated JSON accepted")
	}
	if _, err := p.decode(simpleRequest(), []byte(`{"choices":[]}`)); err == nil {
		t.Fatal("no choices accepted")
	}
	_, err := p.decode(simpleRequest(), []byte(`{"choices":[{"message":{"tool_calls":[{"id":"x","function":{"name":"f","arguments":"{not json"}}]}}]}`))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Code != aienvelope.CodeEnvelopeValidationFailed {
		t.Fatalf("bad tool arguments: %v", err)
	}
}

func TestAttemptTimeoutIsRetryableUnavailable(t *testing.T) {
	srv := wiretest.NewServer(t, "openai_success")
	srv.Gate = make(chan struct{}) // never opened: the server does not answer
	p := New(Config{BaseURL: srv.URL + "/v1", Model: "m", Timeout: 50 * time.Millisecond})
	_, err := p.Generate(context.Background(), simpleRequest())
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Code != aienvelope.CodeProviderUnavailable || !pe.Retryable || !strings.Contains(pe.Message, "in time") {
		t.Fatalf("got %v", err)
	}
}

func TestCallerCancellationIsNotMistakenForAServerError(t *testing.T) {
	srv := wiretest.NewServer(t, "openai_success")
	srv.Gate = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the request has reached the server (or after 20 s, so
		// that a request that never arrives fails the test, not hangs it).
		for deadline := time.Now().Add(20 * time.Second); srv.Calls() == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, err := New(Config{BaseURL: srv.URL + "/v1", Model: "m"}).Generate(ctx, simpleRequest())
	if err == nil || ctx.Err() == nil {
		t.Fatalf("got %v", err)
	}
}
