package wop

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// maxCauseDepth bounds how far the rule looks under details.cause.
// Envelopes cross process boundaries, so their details are untrusted
// input; real chains are a handful of levels deep.
const maxCauseDepth = 32

// retryableItself reports whether e is retryable by its own envelope,
// without looking at its cause.
func (e *Error) retryableItself() bool {
	switch e.Code {
	case CodeCancelled:
		return false
	case CodeUnavailable:
		return true
	}
	return e.Retryable
}

// retryableCause returns the outermost envelope nested under e's
// details.cause that is retryable by itself, or nil when there is none.
// The walk stops at a cancelled: what lies under it is not retryable
// through it.
func (e *Error) retryableCause() *Error {
	details := e.Details
	for range maxCauseDepth {
		c := causeIn(details)
		if c == nil || c.Code == CodeCancelled {
			return nil
		}
		if c.retryableItself() {
			return c
		}
		details = c.Details
	}
	return nil
}

// causeIn reads details.cause as an envelope; details of another shape, or
// a cause without a code, carry none.
func causeIn(details json.RawMessage) *Error {
	if len(details) == 0 {
		return nil
	}
	var d struct {
		Cause *Error `json:"cause"`
	}
	if err := json.Unmarshal(details, &d); err != nil || d.Cause == nil || d.Cause.Code == "" {
		return nil
	}
	return d.Cause
}

// IsRetryable reports whether err is worth retrying as it was made: its
// envelope is retryable by itself, or a cause nested under its
// details.cause is, at any depth (see the package documentation). A nil
// err is not, nor is a cancelled, whatever lies under it. An error that
// is not a *Error is "internal", which is not retryable.
func IsRetryable(err error) bool {
	e := AsError(err)
	if e == nil || e.Code == CodeCancelled {
		return false
	}
	return e.retryableItself() || e.retryableCause() != nil
}

// Classified returns e with its retryable flag set as the rule says: e
// itself when the flag is already right, otherwise a copy marked
// retryable. When the copy is retryable because of a cause, its message
// ends with "(retryable: caused by <code>)", naming the outermost
// retryable cause, so that a person reading only the message learns why.
// The flag is only ever raised: an envelope its producer marked retryable
// stays so.
func (e *Error) Classified() *Error {
	if e == nil || e.Retryable || e.Code == CodeCancelled {
		return e
	}
	c := *e
	switch {
	case e.retryableItself():
		c.Retryable = true
	default:
		cause := e.retryableCause()
		if cause == nil {
			return e
		}
		c.Retryable = true
		c.Message += fmt.Sprintf(" (retryable: caused by %s)", cause.Code)
	}
	return &c
}

// WithCause returns a copy of e that carries the envelope of cause under
// details.cause, unaltered, and is classified by the rule above: it is
// retryable when e is, or when cause is retryable itself or through a
// cause of its own (a cancelled never is). Other keys of e's details (an object) are kept, so
// call WithDetails first and WithCause last. Details of another shape are
// moved under details.details rather than lost. A nil cause returns a
// copy of e unchanged.
func (e *Error) WithCause(cause error) *Error {
	c := *e
	ce := AsError(cause)
	if ce == nil {
		return &c
	}
	details := map[string]json.RawMessage{}
	if len(e.Details) > 0 {
		if err := json.Unmarshal(e.Details, &details); err != nil || details == nil {
			details = map[string]json.RawMessage{"details": e.Details}
		}
	}
	raw, err := json.Marshal(ce)
	if err != nil {
		// An envelope is strings, a bool and valid JSON; only a Details
		// that is not valid JSON fails, and then the cause's text remains.
		raw, _ = json.Marshal(&Error{Code: ce.Code, Message: ce.Message, Capability: ce.Capability, Retryable: ce.Retryable})
	}
	details["cause"] = raw
	b, err := json.Marshal(details)
	if err != nil {
		c.Message += fmt.Sprintf(" (details dropped: %v)", err)
		return &c
	}
	c.Details = b
	return c.Classified()
}

// HopError returns the envelope of err, the failure of a call made with
// ctx to another process. A deadline_exceeded that arrives while the
// caller's own deadline has not passed (ctx's, and that of the call
// context ctx carries) was the deadline of a hop further on, not the
// caller's: it comes back marked retryable, since a retry gets a fresh
// one. Every other failure is returned as it is. A nil err returns nil.
func HopError(ctx context.Context, err error) *Error {
	e := AsError(err)
	if e == nil || e.Code != CodeDeadlineExceeded || e.Retryable || ownDeadlinePassed(ctx) {
		return e
	}
	return e.WithRetryable(true)
}

// ownDeadlinePassed reports whether the caller's deadline has passed or
// the caller gave up. The clock is read as well as ctx.Err(), because a
// hop's report of the shared deadline can arrive before ctx's own timer
// has fired.
func ownDeadlinePassed(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	deadline, ok := ctx.Deadline()
	if call, has := CallContextFrom(ctx); has && !call.Deadline.IsZero() && (!ok || call.Deadline.Before(deadline)) {
		deadline, ok = call.Deadline, true
	}
	return ok && !time.Now().Before(deadline)
}
