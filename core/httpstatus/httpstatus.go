// Package httpstatus holds the shapes of the HTTP answers of `host serve`
// that are not plain successes, and how the host's errors map to them.
//
// Two shapes exist. A request the host refuses before any pack code runs
// (bad route, credentials, body or input, an unknown node, a pack that
// cannot run now, an idempotency-key problem, a state directory that takes
// no writes) is a non-2xx answer in OpenWOP's HTTP error envelope
// {error, message, details}, built by Refusal. A node that ran is a run
// outcome (Outcome), answered 200 whether it succeeded or failed, whose
// error is the ctx-level envelope {code, message, capability, retryable,
// details} that packs and plugins use. The idempotency rules, written in
// terms of HTTP statuses, use Refusal's status to decide which refusals
// are kept, for the API and `host run` alike.
package httpstatus

import (
	"encoding/json"
	"net/http"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/idempotency"
	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/core/packsign"
	"github.com/wophost/wophost/sdk/wop"
)

// OpenWOP's registered HTTP error codes the host answers with. A code
// another package defines is named here from its definition.
const (
	CodeValidation            = wop.CodeValidation
	CodeIdempotencyKeyInvalid = idempotency.CodeKeyInvalid
	CodePackValidationFailed  = wop.CodePackValidationFailed
	CodePackPeerDependency    = wop.CodePackPeerDependencyMissing
	CodePackRequirementUnmet  = wop.CodePackRuntimeRequirementUnmet
	CodeUnauthenticated       = "unauthenticated"
	CodeForbidden             = "forbidden"
	CodeNotFound              = wop.CodeNotFound
	CodeIdempotencyMismatch   = idempotency.CodeKeyMismatch
	CodeIdempotencyInFlight   = idempotency.CodeInFlight
	CodePayloadTooLarge       = "payload_too_large"
	CodeCapabilityNotProvided = wop.CodeCapabilityNotProvided
	CodeRecursionLimit        = "recursion_limit_exceeded"
	CodeInternalError         = "internal_error"
	CodeRunnerUnavailable     = "runner_unavailable"
	CodeCredentialUnavailable = packmanifest.CodeCredentialUnavailable
	CodePackKindInvalid       = packmanifest.CodePackKindInvalid
	CodePackEngine            = packmanifest.CodePackEngineUnsupported
	CodePackPeerUndefined     = packmanifest.CodePackPeerDependencyUndefined
	CodePackSignatureInvalid  = packsign.CodeSignatureInvalid
	CodeOAuthUnsupported      = packmanifest.CodeOAuthProviderUnsupported

	// CodeRunExpired refuses a replay whose source run existed but whose
	// record retention has pruned (410 Gone); an id never recorded is
	// not_found.
	CodeRunExpired = "run_expired"
	// CodeReplayDivergedAtRefusal refuses a replay that diverged from its
	// source run's invocation log at a refusal (409 Conflict).
	CodeReplayDivergedAtRefusal = dispatch.CodeReplayDivergedAtRefusal
	// CodeReplaySourceMissing refuses a replay whose source run's record
	// exists and cannot be trusted: cut short, altered, or a link (409
	// Conflict).
	CodeReplaySourceMissing = dispatch.CodeReplaySourceMissing
)

// The host's vendor codes: refusals no registered code describes.
const (
	// CodeMethodNotAllowed answers a method a route does not serve (405).
	CodeMethodNotAllowed = "wophost.method_not_allowed"
	// CodeStorageUnavailable refuses a run while the state directory (or
	// the database of the postgres backend) cannot take its records, or
	// holds the most idempotency keys it may.
	CodeStorageUnavailable = "wophost.storage_unavailable"
	// CodeDeadlineExceeded refuses a request whose deadline passed before
	// its node was dispatched.
	CodeDeadlineExceeded = "wophost.deadline_exceeded"
	// CodeCancelled refuses a request whose caller went away before its
	// node was dispatched.
	CodeCancelled = "wophost.cancelled"
	// CodeUpstreamUnavailable refuses a request a service the host
	// depends on could not answer before the node was dispatched.
	CodeUpstreamUnavailable = "wophost.upstream_unavailable"
)

// statusTable is the HTTP status of every code the host answers with:
// for registered codes the status OpenWOP assigns them.
func statusTable() map[string]int {
	return map[string]int{
		CodeValidation:            http.StatusBadRequest,
		CodeIdempotencyKeyInvalid: http.StatusBadRequest,
		CodePackValidationFailed:  http.StatusBadRequest,
		CodePackPeerDependency:    http.StatusBadRequest,
		CodePackRequirementUnmet:  http.StatusBadRequest,
		CodePackKindInvalid:       http.StatusBadRequest,
		CodePackEngine:            http.StatusBadRequest,
		CodePackPeerUndefined:     http.StatusBadRequest,
		CodePackSignatureInvalid:  http.StatusBadRequest,
		CodeOAuthUnsupported:      http.StatusBadRequest,
		CodeCredentialUnavailable: http.StatusNotImplemented,
		CodeUnauthenticated:       http.StatusUnauthorized,
		CodeForbidden:             http.StatusForbidden,
		CodeNotFound:              http.StatusNotFound,
		CodeMethodNotAllowed:      http.StatusMethodNotAllowed,
		CodeIdempotencyMismatch:   http.StatusConflict,
		CodeIdempotencyInFlight:   http.StatusConflict,
		CodePayloadTooLarge:       http.StatusRequestEntityTooLarge,
		CodeCapabilityNotProvided: http.StatusUnprocessableEntity,
		CodeRecursionLimit:        http.StatusUnprocessableEntity,
		CodeInternalError:         http.StatusInternalServerError,
		CodeUpstreamUnavailable:   http.StatusBadGateway,
		CodeRunnerUnavailable:     http.StatusServiceUnavailable,
		CodeStorageUnavailable:    http.StatusServiceUnavailable,
		CodeCancelled:             http.StatusServiceUnavailable,
		CodeDeadlineExceeded:      http.StatusGatewayTimeout,
		// Replays of run records.
		CodeRunExpired:              http.StatusGone,
		CodeReplayDivergedAtRefusal: http.StatusConflict,
		CodeReplaySourceMissing:     http.StatusConflict,
	}
}

// Codes lists every code Refusal can answer with and its status.
func Codes() map[string]int { return statusTable() }

// StatusOf is the HTTP status of an OpenWOP code this package answers
// with; 500 for any other.
func StatusOf(code string) int {
	if s, ok := statusTable()[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// ctxTable maps the ctx-level codes the host refuses with to the code of
// the HTTP answer; a code missing here is answered as internal_error,
// keeping the code in details.code. The sandbox's memory, capability and
// escape codes are left out on purpose: they come from pack code that ran,
// so they are answered as a failed node is, and sandbox_timeout as the
// deadline it is.
func ctxTable() map[string]string {
	return map[string]string{
		wop.CodeValidation:                           CodeValidation,
		idempotency.CodeKeyInvalid:                   CodeIdempotencyKeyInvalid,
		wop.CodePackValidationFailed:                 CodePackValidationFailed,
		wop.CodePackPeerDependencyMissing:            CodePackPeerDependency,
		wop.CodePackRuntimeRequirementUnmet:          CodePackRequirementUnmet,
		packmanifest.CodePackKindInvalid:             CodePackKindInvalid,
		packmanifest.CodePackEngineUnsupported:       CodePackEngine,
		packmanifest.CodePackPeerDependencyUndefined: CodePackPeerUndefined,
		packsign.CodeSignatureInvalid:                CodePackSignatureInvalid,
		packmanifest.CodeOAuthProviderUnsupported:    CodeOAuthUnsupported,
		packmanifest.CodeCredentialUnavailable:       CodeCredentialUnavailable,
		wop.CodeNotFound:                             CodeNotFound,
		wop.CodeIdempotencyKeyMismatch:               CodeIdempotencyMismatch,
		idempotency.CodeInFlight:                     CodeIdempotencyInFlight,
		wop.CodeCapabilityNotProvided:                CodeCapabilityNotProvided,
		wop.CodeHostCapabilityMissing:                CodeCapabilityNotProvided,
		wop.CodeCapabilityNotDeclared:                CodeForbidden,
		wop.CodeCallDepthExceeded:                    CodeRecursionLimit,
		wop.CodeUnavailable:                          CodeRunnerUnavailable,
		wop.CodeInternal:                             CodeInternalError,
		wop.CodeDeadlineExceeded:                     CodeDeadlineExceeded,
		wop.CodeSandboxTimeout:                       CodeDeadlineExceeded,
		wop.CodeCancelled:                            CodeCancelled,
		wop.CodeUpstreamUnavailable:                  CodeUpstreamUnavailable,
		wop.CodeMCPError:                             CodeUpstreamUnavailable,
	}
}

// Envelope is OpenWOP's HTTP error envelope, the body of every non-2xx
// answer. Details is always an object.
type Envelope struct {
	Error   string          `json:"error"`
	Message string          `json:"message"`
	Details json.RawMessage `json:"details"`
}

// Refusal is the HTTP answer to a request refused with err: its status
// and OpenWOP envelope. The ctx-level code maps to a registered code
// where one fits (ctxTable), to a host vendor code otherwise; a storage
// refusal (details.storage set) is wophost.storage_unavailable. The
// envelope's capability and retryable move into details, beside the
// fields of its details object (a details value that is not an object
// goes under details.data).
func Refusal(err error) (int, Envelope) {
	e := wop.AsError(err)
	if e == nil {
		e = wop.Errorf(wop.CodeInternal, "no error")
	}
	details := map[string]any{}
	if len(e.Details) > 0 {
		var obj map[string]json.RawMessage
		if json.Unmarshal(e.Details, &obj) == nil && obj != nil {
			for k, v := range obj {
				details[k] = v
			}
		} else {
			details["data"] = e.Details
		}
	}
	code, ok := ctxTable()[e.Code]
	switch {
	case ok && code == CodeRunnerUnavailable && details["storage"] != nil:
		code = CodeStorageUnavailable
	case ok:
	case statusTable()[e.Code] != 0:
		code = e.Code
	default:
		// No answer code fits: the caller still learns the host's own.
		code = CodeInternalError
		details["code"] = e.Code
	}
	retryable := wop.IsRetryable(e)
	details["retryable"] = retryable
	if e.Capability != "" {
		details["capability"] = e.Capability
	}
	raw, merr := json.Marshal(details)
	if merr != nil {
		raw = json.RawMessage(`{"retryable":false}`)
	}
	// OpenWOP's message is never empty.
	message := e.Message
	if message == "" {
		message = "the request was refused (" + code + ")"
	}
	return StatusOf(code), Envelope{Error: code, Message: message, Details: raw}
}

// RetryAfter reports whether a refusal with status and err is answered
// with a Retry-After header: a retryable refusal whose status says "not
// now" (409 in flight, 429, 503).
func RetryAfter(status int, err error) bool {
	if !wop.IsRetryable(wop.AsError(err)) {
		return false
	}
	switch status {
	case http.StatusConflict, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return true
	}
	return false
}

// Outcome statuses of a node that ran.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
)

// Outcome is the answer about a node that ran (200 over HTTP): its output
// when it succeeded, its ctx-level error envelope when it failed, a
// deadline or cancellation during the run included.
type Outcome struct {
	RunID  string          `json:"runId"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  *wop.Error      `json:"error,omitempty"`
}

// NewOutcome is the outcome of run runID: succeeded with output when err
// is nil, failed with err's envelope otherwise.
func NewOutcome(runID string, output json.RawMessage, err error) Outcome {
	if err != nil {
		return Outcome{RunID: runID, Status: OutcomeFailed, Error: wop.AsError(err)}
	}
	if len(output) == 0 {
		output = json.RawMessage("null")
	}
	return Outcome{RunID: runID, Status: OutcomeSucceeded, Output: output}
}

// Kept reports whether the idempotency rules keep an outcome and answer it
// again to a repeated request. A node that ran is kept when it succeeded
// or failed with an error that is not retryable (a retryable failure's
// repeat runs again). A refusal is kept by OpenWOP's HTTP rules
// (idempotency.Final) applied to the status Refusal answers it with.
func Kept(ran bool, err error) bool {
	if err == nil {
		return true
	}
	if ran {
		return !wop.IsRetryable(wop.AsError(err))
	}
	status, env := Refusal(err)
	return idempotency.Final(status, env.Error, wop.IsRetryable(wop.AsError(err)))
}
