// Package httpstatus maps the error codes of the host's envelope to the
// HTTP statuses they are answered with. The HTTP API uses it to answer,
// and the idempotency rules use it to decide which outcomes are kept (they
// are written in terms of statuses), for the API and `host run` alike.
package httpstatus

import (
	"net/http"
	"strings"

	"github.com/wophost/wophost/core/idempotency"
	"github.com/wophost/wophost/sdk/wop"
)

// Of is the HTTP status a failed node execution is answered with: For its
// code, except that a retryable envelope (wop.IsRetryable, which counts
// retryable causes) whose code would be a 4xx other than 409 or 429 is
// 503. A 4xx tells clients, proxies and idempotency layers that the
// request must not be repeated as it is (OpenWOP's idempotency rules keep
// a non-retryable 4xx and replay it to a same-key retry, and never keep a
// 5xx), so a consensus_failed whose ballots failed because a plugin was
// restarting must not be one. 409 and 429 already say "not now" (an
// idempotency key in flight, a rate limit). The code in the body is kept.
func Of(e *wop.Error) int {
	status := For(e.Code)
	if status >= 400 && status < 500 && status != http.StatusConflict && status != http.StatusTooManyRequests && wop.IsRetryable(e) {
		return http.StatusServiceUnavailable
	}
	return status
}

// For is the HTTP status a failure with the envelope code is answered
// with, before its retryable flag is looked at. Codes of vendor families, and codes this table does not know, are
// 500 unless they end in "_not_found" (404) or "_validation_failed" (422).
func For(code string) int {
	switch code {
	case wop.CodeValidation, idempotency.CodeKeyInvalid:
		return http.StatusBadRequest
	case wop.CodeNotFound:
		return http.StatusNotFound
	case wop.CodeCapabilityNotProvided, wop.CodePackPeerDependencyMissing:
		return http.StatusNotImplemented
	case wop.CodeCapabilityNotDeclared:
		return http.StatusForbidden
	case wop.CodeIdempotencyKeyMismatch, idempotency.CodeInFlight:
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
