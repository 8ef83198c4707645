// Package provider is the boundary between the aiEnvelope plugin and its
// backends. A backend turns a Request (prompts already filled in, the
// conversation in the family's neutral shape) into a Response, or fails
// with an *Error whose code is one of the family's codes.
package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/wop"
)

// Provider is one configured backend.
type Provider interface {
	// Generate makes one attempt; retries are the caller's business.
	Generate(ctx context.Context, req *Request) (*Response, error)
}

// Request is what a backend receives.
type Request struct {
	// System is the system prompt, variables filled in ("" for none).
	System string
	// Messages is the conversation; the request's userMessage, when set,
	// is its last entry.
	Messages []aienvelope.Message
	// Model is the model to use: the request's, else the block's.
	Model       string
	Temperature *float64
	MaxTokens   *int
	Stop        []string
	Seed        *int64
	// Output is nil for plain text.
	Output *aienvelope.Output
	Tools  []aienvelope.Tool
}

// Response is a backend's answer.
type Response struct {
	Text      string
	ToolCalls []aienvelope.ToolCall
	// FinishReason is one of the Finish* constants.
	FinishReason string
	Usage        aienvelope.Usage
	// Model is the model the backend says answered.
	Model    string
	Warnings []aienvelope.Warning
}

// Unified finish reasons (the family's). Each backend maps its own values
// onto these.
const (
	FinishStop          = aienvelope.FinishStop
	FinishLength        = aienvelope.FinishLength
	FinishToolCalls     = aienvelope.FinishToolCalls
	FinishContentFilter = aienvelope.FinishContentFilter
	FinishContextLength = aienvelope.FinishContextLength
	FinishOther         = aienvelope.FinishOther
)

// Warning codes (the family's).
const (
	// WarnUnsupportedSetting marks a request setting the backend ignored.
	WarnUnsupportedSetting = aienvelope.WarningUnsupportedSetting
	// WarnPossibleTruncation marks a prompt the backend may have cut
	// without saying so (Ollama fills its context window silently).
	WarnPossibleTruncation = aienvelope.WarningPossibleTruncation
)

// Ignored returns the warning for a setting the backend ignores.
func Ignored(setting, backend string) aienvelope.Warning {
	return aienvelope.Warning{Code: WarnUnsupportedSetting, Message: fmt.Sprintf("%s is not supported by the %s provider and was ignored", setting, backend)}
}

// Error is a classified backend failure. It implements the retry
// package's Retryable and converts to the family's error envelope.
type Error struct {
	// Code is one of the family's codes (or validation_error).
	Code    string
	Message string
	// Retryable is the class's verdict, not the HTTP status's.
	Retryable bool
	// After is the server's requested wait, 0 if none.
	After time.Duration
	// HTTPStatus, ProviderCode and RequestID describe the backend's
	// answer for the operator; they may be zero.
	HTTPStatus   int
	ProviderCode string
	RequestID    string
}

// Error implements error.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// IsRetryable implements retry.Retryable.
func (e *Error) IsRetryable() bool { return e.Retryable }

// RetryAfter implements retry.Retryable.
func (e *Error) RetryAfter() time.Duration { return e.After }

// WOP converts e to the error envelope pack code receives.
func (e *Error) WOP() *wop.Error {
	d := map[string]any{}
	if e.After > 0 {
		d["retryAfterMs"] = e.After.Milliseconds()
	}
	if e.HTTPStatus != 0 {
		d["httpStatus"] = e.HTTPStatus
	}
	if e.ProviderCode != "" {
		d["providerCode"] = e.ProviderCode
	}
	if e.RequestID != "" {
		d["providerRequestId"] = e.RequestID
	}
	we := wop.Errorf(e.Code, "%s", e.Message).WithRetryable(e.Retryable)
	if len(d) > 0 {
		we = we.WithDetails(d)
	}
	return we
}

// Unavailable is a transport failure or a server-side error worth
// retrying.
func Unavailable(format string, args ...any) *Error {
	return &Error{Code: aienvelope.CodeProviderUnavailable, Message: fmt.Sprintf(format, args...), Retryable: true}
}

// maxQuoted bounds how much of a backend's message an error carries.
const maxQuoted = 500

// keyLike matches strings shaped like API keys, including the masked
// forms some backends echo back ("sk-abc***xyz").
var keyLike = regexp.MustCompile(`\b(sk|key|rk|pk)-[A-Za-z0-9_\-\*\.]{6,}`)

// Sanitize prepares a backend's message for an error: the configured
// secret and anything shaped like a key are removed, control characters
// dropped and the length bounded, because errors reach logs and packs.
func Sanitize(msg, secret string) string {
	if secret != "" {
		msg = strings.ReplaceAll(msg, secret, "[redacted]")
	}
	msg = keyLike.ReplaceAllString(msg, "[redacted]")
	msg = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' && r != '\t' {
			return -1
		}
		return r
	}, msg)
	if len(msg) > maxQuoted {
		cut := maxQuoted
		for cut > 0 && !utf8Start(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// JSONText returns raw as a compact JSON text, or "{}" for empty input,
// for wire formats that carry tool arguments as a string. Compacting
// keeps numbers exactly as they were written.
func JSONText(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
