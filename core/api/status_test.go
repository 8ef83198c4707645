package api

import (
	"net/http"
	"testing"
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
