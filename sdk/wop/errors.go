// Package wop holds the plain Go types every side of the host-services
// contract shares: the error envelope, its codes and the call context.
//
// # Retryable causes
//
// A family error often reports what went wrong further down: the agent
// runtime's consensus_failed names the ballot failure that caused it, and
// an agent's failure names the aiEnvelope or mcp failure under it. Such an
// error carries the envelope of its cause, unaltered, under
// details.cause, and the cause may carry one of its own.
//
// The rule: an error is retryable when its own envelope is, or when any
// cause nested under it is. A transient failure at the bottom of a chain
// (a plugin restarting under one agent's turn) must not turn into a
// permanent answer at the top, because a caller decides whether to retry
// by the top-level flag alone.
//
// An envelope counts as retryable by itself when
//
//   - its code is unavailable, whatever its flag says: the contract
//     defines the code as a plugin or store that is down or restarting,
//     which is transient by definition, and a producer that forgot the
//     flag must not make it permanent;
//   - or its flag says so, which is how every other transient failure is
//     known: provider_unavailable, provider_rate_limited,
//     prompt_store_unavailable, mailbox_full, an upstream_unavailable that
//     is a transport failure (an upstream_unavailable for an oversized
//     result is not, as the same call yields the same result), a vendor's
//     own codes, and a deadline_exceeded of a hop (see HopError);
//   - but never when its code is cancelled: the caller gave up, and a
//     retry would go against its wish. For the same reason a cancelled is
//     not made retryable by a cause under it.
//
// A deadline_exceeded counts only with its flag because the code covers
// two different things: the caller's own deadline (the caller chose the
// budget, and a retry unchanged would spend it again) and the deadline of
// a hop further on, which only the hop's caller can tell apart.
//
// IsRetryable applies the rule, WithCause builds a family error from its
// cause by it, Classified repairs an envelope built by hand, and HopError
// marks a deadline_exceeded of a hop.
package wop

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Error codes of the host-services contract. A vendor family uses codes
// prefixed with its own "org.name".
const (
	CodeCapabilityNotProvided     = "capability_not_provided"
	CodeHostCapabilityMissing     = "host_capability_missing" // accepted alias of CodeCapabilityNotProvided
	CodePackPeerDependencyMissing = "pack_peer_dependency_missing"
	CodeCapabilityNotDeclared     = "capability_not_declared"
	CodePackValidationFailed      = "pack_validation_failed"
	CodeValidation                = "validation_error"
	CodeNotFound                  = "not_found"
	CodeIdempotencyKeyMismatch    = "idempotency_key_mismatch"
	CodeUnavailable               = "unavailable"
	CodeDeadlineExceeded          = "deadline_exceeded"
	CodeCancelled                 = "cancelled"
	CodeCallDepthExceeded         = "call_depth_exceeded"
	CodeInternal                  = "internal"
	CodeMCPError                  = "mcp_error"
	CodeUpstreamUnavailable       = "upstream_unavailable"
)

// Error codes of containment (OpenWOP's sandbox execution contract and its
// runtime requirements). None is retryable: a retry unchanged meets the
// same policy, or the same limit, again.
const (
	// CodePackRuntimeRequirementUnmet refuses a pack at load whose
	// runtime.requires[] names a requirement the operator's sandbox policy
	// does not grant, before any of its code runs. details.unmet lists the
	// tokens not granted, details.manifest is the pack's "name@version".
	CodePackRuntimeRequirementUnmet = "pack_runtime_requirement_unmet"
	// CodeSandboxMemoryExceeded fails a node whose pack went past the
	// memory its sandbox allows (the process was killed for it).
	// details.limitBytes is the limit.
	CodeSandboxMemoryExceeded = "sandbox_memory_exceeded"
	// CodeSandboxTimeout fails a node that went past the wall-clock time
	// its sandbox allows. It carries no details.
	CodeSandboxTimeout = "sandbox_timeout"
	// CodeSandboxCapabilityDenied fails a node whose pack attempted an
	// operation its sandbox refused (a connection, a new process, a file
	// outside its paths). details.requestedCapability names the
	// runtime.requires token that would allow it, or "unknown".
	CodeSandboxCapabilityDenied = "sandbox_capability_denied"
	// CodeSandboxEscapeAttempt fails a node whose pack attempted what no
	// policy grants (a refused system call such as ptrace or mount, a
	// signal to a process outside its sandbox). details.escapeKind says
	// which.
	CodeSandboxEscapeAttempt = "sandbox_escape_attempt"
)

// Error is the error envelope {code, message, capability, retryable,
// details} that reaches pack code. It survives every process hop intact.
type Error struct {
	Code       string          `json:"code"`
	Message    string          `json:"message"`
	Capability string          `json:"capability,omitempty"`
	Retryable  bool            `json:"retryable"`
	Details    json.RawMessage `json:"details,omitempty"`
}

// Error implements error.
func (e *Error) Error() string {
	if e.Capability != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Code, e.Message, e.Capability)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, &wop.Error{Code: wop.CodeNotFound}) works. The alias
// host_capability_missing matches capability_not_provided.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return canonicalCode(e.Code) == canonicalCode(t.Code)
}

func canonicalCode(c string) string {
	if c == CodeHostCapabilityMissing {
		return CodeCapabilityNotProvided
	}
	return c
}

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithCapability returns a copy of e naming the capability it concerns,
// e.g. "host.aiEnvelope.generate".
func (e *Error) WithCapability(capability string) *Error {
	c := *e
	c.Capability = capability
	return &c
}

// WithRetryable returns a copy of e with the retryable flag set to r.
func (e *Error) WithRetryable(r bool) *Error {
	c := *e
	c.Retryable = r
	return &c
}

// WithDetails returns a copy of e carrying v, marshalled to JSON, as its
// details. A value that cannot be marshalled is dropped with a note in the
// message rather than losing the error.
func (e *Error) WithDetails(v any) *Error {
	c := *e
	b, err := json.Marshal(v)
	if err != nil {
		c.Message += fmt.Sprintf(" (details dropped: %v)", err)
		return &c
	}
	c.Details = b
	return &c
}

// AsError returns err as an *Error: itself when it already is one (also
// when wrapped), otherwise an "internal" error carrying its text.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var we *Error
	if errors.As(err, &we) {
		return we
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// CodeOf returns the contract code of err, or "" for nil.
func CodeOf(err error) string {
	// A typed nil (*Error)(nil) in err is no error either.
	if we := AsError(err); we != nil {
		return we.Code
	}
	return ""
}

// NotProvided is the capability_not_provided error for a surface such as
// "host.aiEnvelope.await".
func NotProvided(capability string) *Error {
	return &Error{
		Code:       CodeCapabilityNotProvided,
		Message:    capability + " is not advertised by this host",
		Capability: capability,
	}
}
