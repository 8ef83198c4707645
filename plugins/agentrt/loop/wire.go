package loop

import "encoding/json"

// The loop calls the families through the SDK's clients (built with nil
// facets: the host checks them). mcp.listTools has no typed result there
// (packs get its raw JSON), so the fields the loop reads are declared
// here.

type listToolsResult struct {
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
	NextCursor *string `json:"nextCursor"`
}

// Usage counts the tokens a run's generate calls consumed, handoffs
// included.
type Usage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

// Total is input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// add counts one generate call's usage.
func (u *Usage) add(in, out int64) {
	u.InputTokens += in
	u.OutputTokens += out
}
