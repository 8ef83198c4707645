package anthropic

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
)

const secret = "sk-ant-api03-wophostTESTSECRET0123456789"

func newProvider(url string) *Provider {
	return New(Config{BaseURL: url, APIKey: secret, Model: "claude-sonnet-4-5", Timeout: 30 * time.Second})
}

func simpleRequest() *provider.Request {
	return &provider.Request{System: "Be brief.", Messages: []aienvelope.Message{{Role: aienvelope.RoleUser, Content: "Capital of France?"}}}
}

func TestSuccess(t *testing.T) {
	srv := wiretest.NewServer(t, "anthropic_success")
	seed := int64(3)
	req := simpleRequest()
	req.Seed = &seed
	got, err := newProvider(srv.URL).Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "Paris is the capital of France." || got.FinishReason != "stop" || got.Model != "claude-sonnet-4-5-20250929" ||
		got.Usage != (aienvelope.Usage{InputTokens: 14, OutputTokens: 10}) {
		t.Errorf("got %+v", got)
	}
	if len(got.Warnings) != 1 || got.Warnings[0].Code != provider.WarnUnsupportedSetting || !strings.Contains(got.Warnings[0].Message, "seed") {
		t.Errorf("warnings %+v, want seed ignored", got.Warnings)
	}
	r := srv.Requests()[0]
	if r.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != secret || r.Header.Get("Anthropic-Version") != APIVersion {
		t.Errorf("request %s headers %v", r.Path, r.Header)
	}
	if want := `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"Capital of France?"}]}]}`; string(r.Body) != want {
		t.Errorf("body\n got %s\nwant %s", r.Body, want)
	}
}

func TestToolLoopOnTheWire(t *testing.T) {
	srv := wiretest.NewServer(t, "anthropic_tool_use")
	req := &provider.Request{
		Messages: []aienvelope.Message{
			{Role: aienvelope.RoleUser, Content: "weather in Paris and Rome?"},
			{Role: aienvelope.RoleAssistant, ToolCalls: []aienvelope.ToolCall{
				{ID: "t1", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris"}`)},
				{ID: "t2", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Rome"}`)}}},
			{Role: aienvelope.RoleTool, ToolCallID: "t1", Content: "18C"},
			{Role: aienvelope.RoleTool, ToolCallID: "t2", Content: "21C"},
		},
		Tools: []aienvelope.Tool{{Name: "get_weather", Description: "Weather", InputSchema: json.RawMessage(`{"type":"object"}`)}},
	}
	got, err := newProvider(srv.URL).Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got.FinishReason != "tool_calls" || got.Text != "I'll check the current weather in Paris." || len(got.ToolCalls) != 1 ||
		got.ToolCalls[0].ID != "toolu_01A09q90qw90lq917835lq9" || string(got.ToolCalls[0].Arguments) != `{"location":"Paris, France"}` {
		t.Errorf("got %+v", got)
	}
	want := `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[` +
		`{"role":"user","content":[{"type":"text","text":"weather in Paris and Rome?"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"get_weather","input":{"location":"Paris"}},{"type":"tool_use","id":"t2","name":"get_weather","input":{"location":"Rome"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"18C"},{"type":"tool_result","tool_use_id":"t2","content":"21C"}]}],` +
		`"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object"}}]}`
	if b := string(srv.Requests()[0].Body); b != want {
		t.Errorf("body\n got %s\nwant %s", b, want)
	}
}

func TestErrorFixtures(t *testing.T) {
	tests := []struct {
		fixture   string
		code      string
		retryable bool
		after     time.Duration
	}{
		{"anthropic_529_overloaded", aienvelope.CodeProviderUnavailable, true, 0},
		{"anthropic_429_rate_limit", aienvelope.CodeProviderRateLimited, true, time.Second},
		{"anthropic_429_spend_limit", aienvelope.CodeProviderQuotaExhausted, false, 0},
		{"anthropic_401_auth", aienvelope.CodeProviderAuthFailed, false, 0},
		{"anthropic_400_prompt_too_long", aienvelope.CodeContextLengthExceeded, false, 0},
		{"anthropic_400_credit_balance", aienvelope.CodeProviderQuotaExhausted, false, 0},
		{"anthropic_500_api_error", aienvelope.CodeProviderUnavailable, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := wiretest.NewServer(t, tt.fixture)
			_, err := newProvider(srv.URL).Generate(context.Background(), simpleRequest())
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *provider.Error", err)
			}
			if pe.Code != tt.code || pe.Retryable != tt.retryable || pe.After != tt.after {
				t.Errorf("got code=%s retryable=%t after=%v (%s)", pe.Code, pe.Retryable, pe.After, pe.Message)
			}
			if !strings.HasPrefix(pe.RequestID, "req_011") {
				t.Errorf("request id %q not carried", pe.RequestID)
			}
			if strings.Contains(pe.WOP().Error(), secret) {
				t.Error("key leaked")
			}
		})
	}
}
