// Package anthropic is the aiEnvelope backend for Anthropic's Messages
// API. It is a small net/http client: one endpoint, and the plugin owns
// retries, so an SDK's retry loop and typed errors would only have to be
// switched off and unwrapped again.
package anthropic

import (
	"bytes"
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

// DefaultBaseURL is Anthropic's API root.
const DefaultBaseURL = "https://api.anthropic.com"

// APIVersion is the anthropic-version header sent with every request.
const APIVersion = "2023-06-01"

// DefaultMaxTokens is sent when neither the request nor the config sets
// one: the API requires max_tokens.
const DefaultMaxTokens = 1024

// Config configures one backend.
type Config struct {
	BaseURL string // default DefaultBaseURL
	APIKey  string
	Model   string
	// MaxTokens is the default max_tokens (0: DefaultMaxTokens).
	MaxTokens int
	// Timeout bounds one HTTP attempt.
	Timeout    time.Duration
	HTTPClient *http.Client
	Now        func() time.Time
}

// Provider is a configured backend.
type Provider struct {
	cfg    Config
	client *http.Client
}

// New returns a backend for cfg.
func New(cfg Config) *Provider {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := cfg.HTTPClient
	if c == nil {
		c = &http.Client{}
	}
	return &Provider{cfg: cfg, client: c}
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type request struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens"`
	System        string          `json:"system,omitempty"`
	Messages      []message       `json:"messages"`
	Temperature   *float64        `json:"temperature,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Tools         []tool          `json:"tools,omitempty"`
	OutputConfig  json.RawMessage `json:"output_config,omitempty"`
}

type response struct {
	Model      string  `json:"model"`
	Content    []block `json:"content"`
	StopReason string  `json:"stop_reason"`
	Usage      struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// Generate makes one Messages call.
func (p *Provider) Generate(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	body, warnings, err := p.encode(req)
	if err != nil {
		return nil, err
	}
	raw, _, err := provider.Post(ctx, provider.Exchange{
		Client: p.client, URL: p.cfg.BaseURL + "/v1/messages", Body: body,
		Header:  http.Header{"Anthropic-Version": {APIVersion}, "X-Api-Key": {p.cfg.APIKey}},
		Timeout: p.cfg.Timeout, Secret: p.cfg.APIKey,
		Classify: func(status int, h http.Header, raw []byte) *provider.Error {
			return Classify(status, h, raw, p.cfg.APIKey, p.cfg.Now())
		},
	})
	if err != nil {
		return nil, err
	}
	out, err := p.decode(raw)
	if err != nil {
		return nil, err
	}
	out.Warnings = append(warnings, out.Warnings...)
	return out, nil
}

func (p *Provider) encode(req *provider.Request) ([]byte, []aienvelope.Warning, error) {
	r := request{Model: req.Model, MaxTokens: p.cfg.MaxTokens, System: req.System, Temperature: req.Temperature, StopSequences: req.Stop}
	if r.Model == "" {
		r.Model = p.cfg.Model
	}
	if req.MaxTokens != nil {
		r.MaxTokens = *req.MaxTokens
	}
	var warnings []aienvelope.Warning
	if req.Seed != nil {
		warnings = append(warnings, provider.Ignored("seed", "anthropic"))
	}
	for _, m := range req.Messages {
		switch m.Role {
		case aienvelope.RoleSystem:
			// Messages has one system prompt; later system turns join it.
			if r.System != "" {
				r.System += "\n\n"
			}
			r.System += m.Content
		case aienvelope.RoleTool:
			b := block{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content}
			// Consecutive tool results travel in one user turn.
			if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "user" && isToolResults(r.Messages[n-1]) {
				r.Messages[n-1].Content = append(r.Messages[n-1].Content, b)
			} else {
				r.Messages = append(r.Messages, message{Role: "user", Content: []block{b}})
			}
		default:
			var bs []block
			if m.Content != "" {
				bs = append(bs, block{Type: "text", Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				in := tc.Arguments
				if len(bytes.TrimSpace(in)) == 0 {
					in = json.RawMessage(`{}`)
				}
				bs = append(bs, block{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: in})
			}
			if len(bs) == 0 {
				bs = []block{{Type: "text", Text: m.Content}}
			}
			r.Messages = append(r.Messages, message{Role: m.Role, Content: bs})
		}
	}
	for _, t := range req.Tools {
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		r.Tools = append(r.Tools, tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	if req.Output != nil && req.Output.Type == aienvelope.OutputJSON && len(req.Output.Schema) > 0 {
		oc, err := json.Marshal(map[string]any{"format": map[string]any{"type": "json_schema", "schema": req.Output.Schema}})
		if err != nil {
			return nil, nil, &provider.Error{Code: wop.CodeValidation, Message: "output.schema: " + err.Error()}
		}
		r.OutputConfig = oc
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, nil, &provider.Error{Code: wop.CodeValidation, Message: "encode request: " + err.Error()}
	}
	return b, warnings, nil
}

func isToolResults(m message) bool {
	for _, b := range m.Content {
		if b.Type != "tool_result" {
			return false
		}
	}
	return true
}

func (p *Provider) decode(raw []byte) (*provider.Response, error) {
	var r response
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, provider.Unavailable("the provider's answer is not a message: %s", provider.Sanitize(err.Error(), p.cfg.APIKey))
	}
	out := &provider.Response{Model: r.Model, FinishReason: mapStop(r.StopReason),
		Usage: aienvelope.Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens}}
	var text strings.Builder
	for _, b := range r.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			in := b.Input
			if len(in) == 0 {
				in = json.RawMessage(`{}`)
			}
			out.ToolCalls = append(out.ToolCalls, aienvelope.ToolCall{ID: b.ID, Name: b.Name, Arguments: in})
		}
	}
	out.Text = text.String()
	return out, nil
}

func mapStop(s string) string {
	switch s {
	case "end_turn", "stop_sequence", "":
		return provider.FinishStop
	case "max_tokens":
		return provider.FinishLength
	case "tool_use":
		return provider.FinishToolCalls
	case "refusal":
		return provider.FinishContentFilter
	case "model_context_window_exceeded":
		return provider.FinishContextLength
	}
	return provider.FinishOther
}

type apiError struct {
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Details struct {
			ErrorCode string `json:"error_code"`
		} `json:"details"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// Classify turns a failed answer into the family's error. A 429 for an
// enforced spend limit is quota, not rate: it will not pass by waiting.
func Classify(status int, h http.Header, raw []byte, secret string, now time.Time) *provider.Error {
	var ae apiError
	_ = json.Unmarshal(raw, &ae)
	msg := ae.Error.Message
	if msg == "" {
		msg = strings.TrimSpace(string(raw))
		if msg == "" {
			msg = http.StatusText(status)
		}
	}
	msg = provider.Sanitize(msg, secret)
	reqID := ae.RequestID
	if reqID == "" {
		reqID = h.Get("Request-Id")
	}
	e := &provider.Error{HTTPStatus: status, ProviderCode: ae.Error.Type, RequestID: provider.Sanitize(reqID, ""), Message: msg}
	lower := strings.ToLower(msg)
	spend := ae.Error.Details.ErrorCode == "enforced_spend_limit_reached" ||
		strings.Contains(lower, "usage limit") || strings.Contains(lower, "spend limit") || strings.Contains(lower, "credit balance")
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Code = aienvelope.CodeProviderAuthFailed
		e.Message = "the provider refused the credentials: " + msg
	case status == http.StatusPaymentRequired || spend:
		e.Code = aienvelope.CodeProviderQuotaExhausted
		e.Message = "the provider's spend limit or credit is exhausted: " + msg
		if ae.Error.Details.ErrorCode != "" {
			e.ProviderCode = ae.Error.Details.ErrorCode
		}
	case status == http.StatusTooManyRequests:
		e.Code, e.Retryable, e.After = aienvelope.CodeProviderRateLimited, true, retry.ParseRetryAfter(h, now)
		e.Message = "the provider is rate limiting: " + msg
	case strings.Contains(lower, "prompt is too long") || strings.Contains(lower, "context window"):
		e.Code = aienvelope.CodeContextLengthExceeded
		e.Message = "the prompt does not fit the model's context: " + msg
	case status == 529 || status == http.StatusRequestTimeout || status == http.StatusConflict || status >= 500:
		e.Code, e.Retryable, e.After = aienvelope.CodeProviderUnavailable, true, retry.ParseRetryAfter(h, now)
		e.Message = fmt.Sprintf("the provider failed (HTTP %d): %s", status, msg)
	default:
		e.Code = wop.CodeValidation
		e.Message = fmt.Sprintf("the provider refused the request (HTTP %d): %s", status, msg)
	}
	return e
}
