package promptlibrary

import (
	"encoding/json"

	"github.com/wophost/wophost/sdk/wop"
)

// Family is the family name in the advertisement.
const Family = wop.FamilyPromptLibrary

// MethodGet is the method name on the wire.
const MethodGet = "get"

// CapabilityGet is the capability named by capability_not_provided errors.
const CapabilityGet = "host." + Family + "." + MethodGet

// IsPureMethod reports whether method is one the contract declares pure:
// it changes nothing anywhere and answers the same request the same way,
// so a replay runs it live instead of answering it from the run's log.
// Only get is: a pinned version is immutable. The management methods
// change the store or answer from its current state, and are not.
func IsPureMethod(method string) bool {
	return method == MethodGet
}

// Error codes of the family. They arrive as wop.Error.Code.
const (
	CodePromptUnpinned         = "prompt_unpinned"
	CodePromptNotFound         = "prompt_not_found"
	CodePromptVersionNotFound  = "prompt_version_not_found"
	CodePromptDigestMismatch   = "prompt_digest_mismatch"   // integrity alarm
	CodePromptStoreUnavailable = "prompt_store_unavailable" // retryable
)

// GetRequest is the body of get. PromptID must be pinned:
// "name@<version>", "name@sha256:<hex>" or "name@<version>#sha256:<hex>";
// a bare "name" resolves only through the calling pack's prompts lock map.
type GetRequest struct {
	PromptID string `json:"promptId"`
}

// Prompt is one pinned, immutable prompt version.
type Prompt struct {
	PromptID string `json:"promptId"`
	Name     string `json:"name"`
	Version  string `json:"version"`
	// Digest is "sha256:<hex>" of Raw; the host checks it before the
	// node sees the prompt.
	Digest string `json:"digest"`
	// SystemPrompt is derived from Raw only, so a replay resolves the
	// same text.
	SystemPrompt string          `json:"systemPrompt"`
	EnvelopeType string          `json:"envelopeType,omitempty"`
	Variables    json.RawMessage `json:"variables,omitempty"`
	// Raw is the verbatim stored text, exactly the bytes Digest covers.
	// It travels as a JSON string, so it must be valid UTF-8 to arrive
	// unchanged.
	Raw string `json:"raw"`
}
