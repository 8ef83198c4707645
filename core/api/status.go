package api

import (
	"net/http"
	"strings"

	"github.com/wophost/wophost/sdk/wop"
)

// StatusOf is the HTTP status a failed node execution is answered with:
// StatusFor its code, except that a retryable envelope (wop.IsRetryable,
// which counts retryable causes) whose code would be a 4xx other than 429
// is 503. A 4xx tells clients, proxies and idempotency layers that the
// request must not be repeated as it is (OpenWOP's idempotency rules
// cache a non-retryable 4xx and replay it to a same-key retry, and never
// cache a 5xx), so a consensus_failed whose ballots failed because a
// plugin was restarting must not be one. The code in the body is kept.
func StatusOf(e *wop.Error) int {
	status := StatusFor(e.Code)
	if status >= 400 && status < 500 && status != http.StatusTooManyRequests && wop.IsRetryable(e) {
		return http.StatusServiceUnavailable
	}
	return status
}

// StatusFor is the HTTP status a failed node execution is answered with,
// by the error code of its envelope, when the envelope is not retryable
// (see StatusOf). Codes of vendor families, and codes
// this table does not know, are 500 unless they end in "_not_found"
// (404) or "_validation_failed" (422).
func StatusFor(code string) int {
	switch code {
	case wop.CodeValidation:
		return http.StatusBadRequest
	case wop.CodeNotFound:
		return http.StatusNotFound
	case wop.CodeCapabilityNotProvided, wop.CodePackPeerDependencyMissing:
		return http.StatusNotImplemented
	case wop.CodeCapabilityNotDeclared:
		return http.StatusForbidden
	case wop.CodeIdempotencyKeyMismatch:
		return http.StatusConflict
	case wop.CodeUnavailable, wop.CodeCancelled:
		return http.StatusServiceUnavailable
	case wop.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case wop.CodeMCPError, wop.CodeUpstreamUnavailable:
		return http.StatusBadGateway
	case wop.CodeCallDepthExceeded:
		return http.StatusLoopDetected
	case wop.CodePackValidationFailed:
		return http.StatusUnprocessableEntity
	case wop.CodeInternal:
		return http.StatusInternalServerError
	}
	switch code {
	case "provider_unavailable", "provider_auth_failed":
		return http.StatusBadGateway
	case "provider_rate_limited", "provider_quota_exhausted", "mailbox_full", "agent_spawn_quota_exhausted":
		return http.StatusTooManyRequests
	case "context_length_exceeded", "envelope_validation_failed", "prompt_unpinned", "prompt_digest_mismatch",
		"agent_budget_exceeded", "consensus_failed":
		return http.StatusUnprocessableEntity
	case "prompt_not_found", "prompt_version_not_found", "agent_not_found":
		return http.StatusNotFound
	case "prompt_store_unavailable":
		return http.StatusServiceUnavailable
	case "agent_timeout":
		return http.StatusGatewayTimeout
	}
	switch {
	case strings.HasSuffix(code, "_not_found"):
		return http.StatusNotFound
	case strings.HasSuffix(code, "_validation_failed"):
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}
