// Package openai is the aiEnvelope backend for the OpenAI-compatible Chat
// Completions wire, spoken by OpenAI itself and by Ollama, vLLM, the
// llama.cpp server and LM Studio. It is a small net/http client rather
// than an SDK because the local servers differ from OpenAI most where an
// SDK is least forgiving: their error shapes, which this package
// classifies server family by server family.
package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/wophost/wophost/plugins/aienvelope/provider"
	"github.com/wophost/wophost/plugins/aienvelope/retry"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/wop"
)

// Config configures one backend.
type Config struct {
	// BaseURL is the API root, such as "https://api.openai.com/v1" or
	// "http://127.0.0.1:11434/v1"; "/chat/completions" is appended.
	BaseURL string
	// APIKey is sent as a bearer token when not empty.
	APIKey string
	// Model is the default model.
	Model string
	// Timeout bounds one HTTP attempt (0: no limit beyond the caller's).
	Timeout time.Duration
	// ContextWindow, when set, is the server's context size in tokens;
	// a prompt that fills it draws a possible_truncation warning (Ollama
	// cuts long prompts silently and reports the cut count).
	ContextWindow int
	// HTTPClient is used when set (tests); otherwise a default client.
	HTTPClient *http.Client
	// Now is the clock for retry-after dates; nil is time.Now.
	Now func() time.Time
}

// Provider is a configured backend.
type Provider struct {
	cfg    Config
	client *http.Client
}

// New returns a backend for cfg.
func New(cfg Config) *Provider {
	c := cfg.HTTPClient
	if c == nil {
		c = &http.Client{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	return &Provider{cfg: cfg, client: c}
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	Name       string         `json:"name,omitempty"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

type chatRequest struct {
	Model          string          `json:"model"`
	Messages       []chatMessage   `json:"messages"`
	Temperature    *float64        `json:"temperature,omitempty"`
	MaxTokens      *int            `json:"max_tokens,omitempty"`
	Stop           []string        `json:"stop,omitempty"`
	Seed           *int64          `json:"seed,omitempty"`
	Tools          []wireTool      `json:"tools,omitempty"`
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
}

type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content   *string        `json:"content"`
			Refusal   *string        `json:"refusal"`
			ToolCalls []wireToolCall `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// Generate makes one Chat Completions call.
func (p *Provider) Generate(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	body, err := p.encode(req)
	if err != nil {
		return nil, err
	}
	header := http.Header{"Accept": {"application/json"}}
	if p.cfg.APIKey != "" {
		header.Set("Authorization", "Bearer "+p.cfg.APIKey)
	}
	classify := func(status int, h http.Header, raw []byte) *provider.Error {
		return Classify(status, h, raw, p.cfg.APIKey, p.cfg.Now())
	}
	raw, h, err := provider.Post(ctx, provider.Exchange{
		Client: p.client, URL: p.cfg.BaseURL + "/chat/completions", Body: body, Header: header,
		Timeout: p.cfg.Timeout, Secret: p.cfg.APIKey, Classify: classify,
	})
	if err != nil {
		return nil, err
	}
	// Some servers report a context overflow with a 200 and an error
	// object; classify those too.
	if e := errorInBody(raw); e != nil {
		return nil, classify(http.StatusOK, h, raw)
	}
	return p.decode(req, raw)
}

func (p *Provider) encode(req *provider.Request) ([]byte, error) {
	cr := chatRequest{Model: req.Model, Temperature: req.Temperature, MaxTokens: req.MaxTokens, Stop: req.Stop, Seed: req.Seed}
	if cr.Model == "" {
		cr.Model = p.cfg.Model
	}
	if req.System != "" {
		cr.Messages = append(cr.Messages, chatMessage{Role: "system", Content: &req.System})
	}
	for _, m := range req.Messages {
		cm := chatMessage{Role: m.Role, ToolCallID: m.ToolCallID}
		content := m.Content
		cm.Content = &content
		if m.Role == aienvelope.RoleAssistant && len(m.ToolCalls) > 0 {
			if content == "" {
				cm.Content = nil
			}
			for _, tc := range m.ToolCalls {
				w := wireToolCall{ID: tc.ID, Type: "function"}
				w.Function.Name, w.Function.Arguments = tc.Name, provider.JSONText(tc.Arguments)
				cm.ToolCalls = append(cm.ToolCalls, w)
			}
		}
		cr.Messages = append(cr.Messages, cm)
	}
	for _, t := range req.Tools {
		w := wireTool{Type: "function"}
		w.Function.Name, w.Function.Description, w.Function.Parameters = t.Name, t.Description, t.InputSchema
		cr.Tools = append(cr.Tools, w)
	}
	if req.Output != nil && req.Output.Type == aienvelope.OutputJSON {
		if len(req.Output.Schema) > 0 {
			rf, err := json.Marshal(map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "envelope", "schema": req.Output.Schema}})
			if err != nil {
				return nil, &provider.Error{Code: wop.CodeValidation, Message: "output.schema: " + err.Error()}
			}
			cr.ResponseFormat = rf
		} else {
			cr.ResponseFormat = json.RawMessage(`{"type":"json_object"}`)
		}
	}
	b, err := json.Marshal(cr)
	if err != nil {
		return nil, &provider.Error{Code: wop.CodeValidation, Message: "encode request: " + err.Error()}
	}
	return b, nil
}

func (p *Provider) decode(req *provider.Request, raw []byte) (*provider.Response, error) {
	var cr chatResponse
	if err := json.Unmarshal(raw, &cr); err != nil {
		return nil, provider.Unavailable("the provider's answer is not a chat completion: %s", provider.Sanitize(err.Error(), p.cfg.APIKey))
	}
	if len(cr.Choices) == 0 {
		return nil, provider.Unavailable("the provider's answer has no choices")
	}
	ch := cr.Choices[0]
	out := &provider.Response{Model: cr.Model, FinishReason: mapFinish(ch.FinishReason)}
	if ch.Message.Content != nil {
		out.Text = *ch.Message.Content
	}
	if out.Text == "" && ch.Message.Refusal != nil {
		out.Text, out.FinishReason = *ch.Message.Refusal, provider.FinishContentFilter
	}
	for _, tc := range ch.Message.ToolCalls {
		args := json.RawMessage(tc.Function.Arguments)
		if strings.TrimSpace(tc.Function.Arguments) == "" {
			args = json.RawMessage(`{}`)
		} else if !json.Valid(args) {
			return nil, &provider.Error{Code: aienvelope.CodeEnvelopeValidationFailed,
				Message: fmt.Sprintf("tool call %q has arguments that are not JSON: %s", tc.Function.Name, provider.Sanitize(tc.Function.Arguments, p.cfg.APIKey))}
		}
		out.ToolCalls = append(out.ToolCalls, aienvelope.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	if len(out.ToolCalls) > 0 && out.FinishReason == provider.FinishStop {
		// Ollama answers tool calls with finish_reason "stop".
		out.FinishReason = provider.FinishToolCalls
	}
	if cr.Usage != nil {
		out.Usage = aienvelope.Usage{InputTokens: cr.Usage.PromptTokens, OutputTokens: cr.Usage.CompletionTokens}
		if w := p.cfg.ContextWindow; w > 0 && cr.Usage.PromptTokens >= w {
			out.Warnings = append(out.Warnings, aienvelope.Warning{Code: provider.WarnPossibleTruncation,
				Message: fmt.Sprintf("the prompt used %d tokens, the whole %d-token context window; the server may have cut it without an error", cr.Usage.PromptTokens, w)})
		}
	}
	if out.Model == "" {
		out.Model = req.Model
	}
	return out, nil
}

func mapFinish(s string) string {
	switch s {
	case "stop", "":
		return provider.FinishStop
	case "length":
		return provider.FinishLength
	case "tool_calls", "function_call":
		return provider.FinishToolCalls
	case "content_filter":
		return provider.FinishContentFilter
	}
	return provider.FinishOther
}

// wireError is the union of the error shapes the compatible servers send:
// OpenAI's and vLLM's {"error":{message,type,code,param}}, llama.cpp's
// {"error":{code,message,type,n_prompt_tokens,n_ctx}}, Ollama's
// {"error":"text"} or {"error":{"message",...}}, and vLLM's older
// top-level {"object":"error","message",...}.
type wireError struct {
	Message string
	Type    string
	Code    string
}

func errorInBody(raw []byte) *wireError {
	var top struct {
		Error   json.RawMessage `json:"error"`
		Object  string          `json:"object"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(raw, &top) != nil {
		return nil
	}
	if top.Object == "error" {
		return &wireError{Message: top.Message, Type: top.Type, Code: codeString(top.Code)}
	}
	if len(top.Error) == 0 || string(top.Error) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(top.Error, &s) == nil {
		return &wireError{Message: s}
	}
	var obj struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(top.Error, &obj) != nil {
		return nil
	}
	return &wireError{Message: obj.Message, Type: obj.Type, Code: codeString(obj.Code)}
}

// codeString reads a code that servers send as a string or a number.
func codeString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// contextPatterns are message fragments that mean the prompt did not
// fit, for servers that give no machine-readable code (vLLM) or older
// builds of the others. Lowercase.
var contextPatterns = []string{
	"maximum context length",
	"context length exceeded",
	"context_length_exceeded",
	"exceeds the available context size",
	"exceed_context_size",
	"prompt is too long",
	"too many tokens",
}

func isContextOverflow(e *wireError) bool {
	if e.Code == "context_length_exceeded" || e.Type == "exceed_context_size_error" {
		return true
	}
	m := strings.ToLower(e.Message)
	for _, p := range contextPatterns {
		if strings.Contains(m, p) {
			return true
		}
	}
	return false
}

// Classify turns a failed answer into the family's error. The order is
// the body's meaning first (a context overflow is final whatever the
// status: llama.cpp sent it with 500), then the status.
func Classify(status int, h http.Header, raw []byte, secret string, now time.Time) *provider.Error {
	we := errorInBody(raw)
	if we == nil {
		we = &wireError{Message: strings.TrimSpace(string(raw))}
		if we.Message == "" {
			we.Message = http.StatusText(status)
		}
	}
	msg := provider.Sanitize(we.Message, secret)
	code := we.Code
	if code == "" {
		code = we.Type
	}
	e := &provider.Error{HTTPStatus: status, ProviderCode: code, Message: msg,
		RequestID: firstHeader(h, "X-Request-Id", "Request-Id")}
	after := retry.ParseRetryAfter(h, now)
	switch {
	case isContextOverflow(we):
		e.Code = aienvelope.CodeContextLengthExceeded
		e.Message = "the prompt does not fit the model's context: " + msg
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Code = aienvelope.CodeProviderAuthFailed
		e.Message = "the provider refused the credentials: " + msg
	case status == http.StatusPaymentRequired || we.Code == "insufficient_quota" || we.Type == "insufficient_quota":
		e.Code = aienvelope.CodeProviderQuotaExhausted
		e.Message = "the provider's quota is exhausted: " + msg
	case status == http.StatusTooManyRequests:
		e.Code, e.Retryable, e.After = aienvelope.CodeProviderRateLimited, true, after
		e.Message = "the provider is rate limiting: " + msg
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status >= 500:
		e.Code, e.Retryable, e.After = aienvelope.CodeProviderUnavailable, true, after
		e.Message = fmt.Sprintf("the provider failed (HTTP %d): %s", status, msg)
	case status == http.StatusOK:
		e.Code, e.Retryable = aienvelope.CodeProviderUnavailable, true
		e.Message = "the provider answered with an error: " + msg
	default:
		// 400, 404, 413, 422: the request is wrong for this server (an
		// unknown model, an unsupported field); retrying cannot help.
		e.Code = wop.CodeValidation
		e.Message = fmt.Sprintf("the provider refused the request (HTTP %d): %s", status, msg)
	}
	return e
}

func firstHeader(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return provider.Sanitize(v, "")
		}
	}
	return ""
}
