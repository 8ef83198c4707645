package loop

import "encoding/json"

// The request and result shapes below are the JSON wire of the families
// the loop calls (CONTRACT §4.1, §4.2, §4.4), reduced to the fields the
// loop sends or reads. They are declared here rather than imported so the
// runtime depends on the contract's JSON alone.

const (
	familyAIEnvelope    = "aiEnvelope"
	familyPromptLibrary = "promptLibrary"
	familyMCP           = "mcp"
)

type promptGetRequest struct {
	PromptID string `json:"promptId"`
}

type promptGetResult struct {
	PromptID     string `json:"promptId"`
	Name         string `json:"name"`
	Version      string `json:"version"`
	Digest       string `json:"digest"`
	SystemPrompt string `json:"systemPrompt"`
}

// Message is one conversation message sent to aiEnvelope.generate.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"toolCalls,omitempty"`
	ToolCallID string     `json:"toolCallId,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// ToolCall is a model's request to call a tool.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Output asks generate for a result format; with Type "json", Schema is
// the JSON Schema the payload must meet.
type Output struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema,omitempty"`
}

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

type generateRequest struct {
	EnvelopeType   string    `json:"envelopeType"`
	SystemPrompt   string    `json:"systemPrompt,omitempty"`
	Messages       []Message `json:"messages,omitempty"`
	Model          string    `json:"model,omitempty"`
	MaxTokens      *int64    `json:"maxTokens,omitempty"`
	Output         *Output   `json:"output,omitempty"`
	Tools          []tool    `json:"tools,omitempty"`
	IdempotencyKey string    `json:"idempotencyKey"`
}

// Usage counts the tokens of generate calls.
type Usage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

// Total is input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

type generateResult struct {
	Status       string          `json:"status"`
	Payload      json.RawMessage `json:"payload"`
	Text         string          `json:"text"`
	ToolCalls    []ToolCall      `json:"toolCalls"`
	FinishReason string          `json:"finishReason"`
	Usage        Usage           `json:"usage"`
}

type listToolsRequest struct {
	ServerID string  `json:"serverId"`
	Cursor   *string `json:"cursor,omitempty"`
}

type listToolsResult struct {
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
	NextCursor *string `json:"nextCursor"`
}

type callToolRequest struct {
	ServerID  string          `json:"serverId"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}
