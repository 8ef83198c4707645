package aienvelope

import (
	"encoding/json"

	"github.com/wophost/wophost/sdk/wop"
)

// Family is the family name in the advertisement.
const Family = wop.FamilyAIEnvelope

// FacetAwait is the facet that enables Await and async generation.
const FacetAwait = "await"

// Method names on the wire.
const (
	MethodGenerate = "generate"
	MethodAwait    = "await"
)

// Capability names carried by capability_not_provided errors.
const (
	CapabilityGenerate = "host." + Family + "." + MethodGenerate
	CapabilityAwait    = "host." + Family + "." + FacetAwait
)

// Error codes of the family. They arrive as wop.Error.Code.
const (
	CodeProviderUnavailable      = "provider_unavailable"     // retryable
	CodeProviderRateLimited      = "provider_rate_limited"    // retryable
	CodeProviderQuotaExhausted   = "provider_quota_exhausted" // not retryable
	CodeProviderAuthFailed       = "provider_auth_failed"
	CodeContextLengthExceeded    = "context_length_exceeded"
	CodeEnvelopeValidationFailed = "envelope_validation_failed"
)

// Finish reasons of a completed result: every provider's own value is
// mapped onto these.
const (
	FinishStop          = "stop"           // the model ended its answer (or hit a stop sequence)
	FinishLength        = "length"         // maxTokens ran out
	FinishToolCalls     = "tool_calls"     // the answer is toolCalls to run
	FinishContentFilter = "content_filter" // the provider withheld or refused the answer
	FinishContextLength = "context_length" // the context window filled while answering
	FinishOther         = "other"          // anything else the provider reported
)

// Warning codes carried by GenerateResult.Warnings.
const (
	// WarningUnsupportedSetting: the provider ignored a request setting
	// (seed on Anthropic, temperature on the local provider, ...).
	WarningUnsupportedSetting = "unsupported_setting"
	// WarningPossibleTruncation: the prompt filled the provider's whole
	// context window, which some servers (Ollama) reach by cutting the
	// prompt silently.
	WarningPossibleTruncation = "possible_truncation"
)

// Result statuses.
const (
	StatusCompleted = "completed"
	StatusPending   = "pending"
)

// Output types of GenerateRequest.Output.
const (
	OutputText = "text"
	OutputJSON = "json"
)

// Message roles. RoleTool marks a message that returns a tool result.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// GenerateRequest is the body of generate.
type GenerateRequest struct {
	EnvelopeType string `json:"envelopeType"`
	// SystemPrompt and UserMessage may hold {{name}} placeholders filled
	// from Variables; a missing variable is envelope_validation_failed.
	SystemPrompt string         `json:"systemPrompt,omitempty"`
	UserMessage  string         `json:"userMessage,omitempty"`
	Messages     []Message      `json:"messages,omitempty"`
	Variables    map[string]any `json:"variables,omitempty"`
	Provider     string         `json:"provider,omitempty"`
	Model        string         `json:"model,omitempty"`
	// Temperature, MaxTokens and Seed are pointers so that a zero value
	// can be sent and "unset" is distinct from it.
	Temperature    *float64 `json:"temperature,omitempty"`
	MaxTokens      *int     `json:"maxTokens,omitempty"`
	Stop           []string `json:"stop,omitempty"`
	Seed           *int64   `json:"seed,omitempty"`
	Output         *Output  `json:"output,omitempty"`
	Tools          []Tool   `json:"tools,omitempty"`
	IdempotencyKey string   `json:"idempotencyKey"`
	// Async asks for a pending result to collect with Await. It is
	// valid only while the await facet is advertised.
	Async bool `json:"async,omitempty"`
}

// Message is one turn of a conversation. An assistant message may carry
// ToolCalls; a RoleTool message answers the call named by ToolCallID.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"toolCalls,omitempty"`
	ToolCallID string     `json:"toolCallId,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// ToolCall is a model's request to call a tool. Arguments is the JSON
// object the model produced, kept raw so it is not re-encoded.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Output selects the result format. With Type OutputJSON the result's
// Payload must validate against Schema.
type Output struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema,omitempty"`
}

// Tool is a tool offered to the model; InputSchema is a JSON Schema.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// GenerateResult is the answer of generate and await. When Status is
// StatusPending only EnvelopeType, EnvelopeID, Status and TimedOut are
// meaningful.
type GenerateResult struct {
	EnvelopeType string `json:"envelopeType"`
	EnvelopeID   string `json:"envelopeId"`
	Status       string `json:"status"`
	// Payload is the parsed object when the output type is json.
	Payload      json.RawMessage `json:"payload"`
	Text         string          `json:"text"`
	ToolCalls    []ToolCall      `json:"toolCalls,omitempty"`
	FinishReason string          `json:"finishReason"`
	Usage        Usage           `json:"usage"`
	Model        string          `json:"model"`
	Provider     string          `json:"provider"`
	Warnings     []Warning       `json:"warnings"`
	// TimedOut is set on a pending await result whose timeout ran out;
	// a timeout is not an error.
	TimedOut bool `json:"timedOut,omitempty"`
	// Raw, when set, is the whole result as JSON, sent in place of the
	// other fields byte for byte: a plugin replaying a result it stored
	// sets Raw alone, so the replay is exactly what it first sent.
	// Decoding never sets it.
	Raw json.RawMessage `json:"-"`
}

// Usage counts the tokens a generation consumed.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// Warning is a non-fatal note from the provider plugin, such as a setting
// the provider ignored.
type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// pendingResult is the reduced shape the contract gives a pending result.
type pendingResult struct {
	EnvelopeType string `json:"envelopeType,omitempty"`
	EnvelopeID   string `json:"envelopeId"`
	Status       string `json:"status"`
	TimedOut     bool   `json:"timedOut,omitempty"`
}

// MarshalJSON writes Raw when set. Otherwise it writes the contract's
// shape for the status: a pending result carries no completion fields,
// and a completed one always carries "warnings" as an array, never null,
// because the contract makes it a list.
func (r GenerateResult) MarshalJSON() ([]byte, error) {
	if r.Raw != nil {
		return r.Raw, nil
	}
	if r.Status == StatusPending {
		return json.Marshal(pendingResult{
			EnvelopeType: r.EnvelopeType,
			EnvelopeID:   r.EnvelopeID,
			Status:       r.Status,
			TimedOut:     r.TimedOut,
		})
	}
	type plain GenerateResult // no MarshalJSON method, so no recursion
	if r.Warnings == nil {
		r.Warnings = []Warning{}
	}
	return json.Marshal(plain(r))
}

// AwaitRequest is the body of await.
type AwaitRequest struct {
	EnvelopeID string `json:"envelopeId"`
	TimeoutMs  int64  `json:"timeoutMs"`
}
