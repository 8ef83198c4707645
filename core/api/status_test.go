package api

import (
	"net/http"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

func TestStatusFor(t *testing.T) {
	for code, want := range map[string]int{
		"validation_error":             http.StatusBadRequest,
		"not_found":                    http.StatusNotFound,
		"capability_not_provided":      http.StatusNotImplemented,
		"capability_not_declared":      http.StatusForbidden,
		"idempotency_key_mismatch":     http.StatusConflict,
		"unavailable":                  http.StatusServiceUnavailable,
		"deadline_exceeded":            http.StatusGatewayTimeout,
		"upstream_unavailable":         http.StatusBadGateway,
		"mcp_error":                    http.StatusBadGateway,
		"call_depth_exceeded":          http.StatusLoopDetected,
		"provider_rate_limited":        http.StatusTooManyRequests,
		"envelope_validation_failed":   http.StatusUnprocessableEntity,
		"prompt_version_not_found":     http.StatusNotFound,
		"acme.widget_not_found":        http.StatusNotFound,
		"acme.order_validation_failed": http.StatusUnprocessableEntity,
		"acme.exploded":                http.StatusInternalServerError,
		"internal":                     http.StatusInternalServerError,
	} {
		if got := StatusFor(code); got != want {
			t.Errorf("StatusFor(%q) = %d, want %d", code, got, want)
		}
	}
}

func TestETagMatches(t *testing.T) {
	const tag = `"abc"`
	for header, want := range map[string]bool{
		`"abc"`: true, `W/"abc"`: true, `"x", "abc"`: true, `*`: true,
		`"abcd"`: false, ``: false, `abc`: false,
	} {
		if got := etagMatches(header, tag); got != want {
			t.Errorf("etagMatches(%q) = %v, want %v", header, got, want)
		}
	}
}

func TestAuthorized(t *testing.T) {
	s := New(NewCurrent(nil), Options{Tokens: []string{"one", "two"}})
	for header, want := range map[string]bool{
		"Bearer one": true, "bearer two": true, "Bearer  two ": true,
		"Bearer three": false, "Bearer ": false, "Basic one": false, "one": false, "": false,
	} {
		if got := s.authorized(header); got != want {
			t.Errorf("authorized(%q) = %v, want %v", header, got, want)
		}
	}
}

// A retryable envelope is never a plain 4xx: the code decides the status
// only while the envelope is not retryable.
func TestStatusOfRetryable(t *testing.T) {
	unavailable := wop.Errorf(wop.CodeUnavailable, "host.aiEnvelope.generate: the plugin went away during the call").WithRetryable(true)
	consensusOver := func(cause *wop.Error) *wop.Error {
		return wop.Errorf("consensus_failed", "round 1 produced no valid ballot").WithCause(cause)
	}
	// Built by hand, flag left false: the cause still decides.
	byHand := wop.Errorf("consensus_failed", "round 1 produced no valid ballot").
		WithDetails(map[string]any{"cause": unavailable})
	tests := []struct {
		name string
		e    *wop.Error
		want int
	}{
		{"consensus_failed over unavailable", consensusOver(unavailable), http.StatusServiceUnavailable},
		{"consensus_failed over unavailable, built by hand", byHand, http.StatusServiceUnavailable},
		{"consensus_failed over a permanent failure", consensusOver(wop.Errorf("provider_auth_failed", "bad key")), http.StatusUnprocessableEntity},
		{"agent_not_found flagged retryable", wop.Errorf("agent_not_found", "m").WithRetryable(true), http.StatusServiceUnavailable},
		{"mailbox_full stays 429", wop.Errorf("mailbox_full", "m").WithRetryable(true), http.StatusTooManyRequests},
		{"provider_unavailable stays 502", wop.Errorf("provider_unavailable", "m").WithRetryable(true), http.StatusBadGateway},
		{"a hop's deadline stays 504", wop.Errorf(wop.CodeDeadlineExceeded, "m").WithRetryable(true), http.StatusGatewayTimeout},
		{"unavailable", unavailable, http.StatusServiceUnavailable},
		{"validation_error", wop.Errorf(wop.CodeValidation, "m"), http.StatusBadRequest},
	}
	for _, tt := range tests {
		if got := StatusOf(tt.e); got != tt.want {
			t.Errorf("%s: StatusOf = %d, want %d", tt.name, got, tt.want)
		}
	}
}
