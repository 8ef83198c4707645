package wop

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
)

// RunToken is the secret that binds host-service calls to one node run.
// The host makes a fresh, unguessable token for each run it dispatches and
// hands it only to the processes that act in that run: the pack in the
// run's Execute, and each plugin in every Invoke made on the run's behalf.
// A host-service call that names the run must carry the token back; the
// run id alone, which appears in logs, run records and API answers, is not
// enough.
//
// The SDKs carry the token in the CallContext of the run's context, so
// node and handler code never handle it: a call made with the ctx a node
// or handler was given carries it. It is opaque on purpose: it prints as
// "RunToken(redacted)" with every fmt verb, as a redacted string in JSON
// and slog, and CallContext leaves it out of its JSON, so logging or
// recording a call context does not leak it.
type RunToken struct {
	secret string
}

// redacted is what a token prints as.
const redacted = "[redacted]"

// NewRunToken wraps secret, a token made by the host or received on the
// wire. The empty secret gives the zero token.
func NewRunToken(secret string) RunToken { return RunToken{secret: secret} }

// Reveal returns the secret, for the code that puts it on the wire (see
// sdk/internal/wire). Nothing else needs it; never log it.
func (t RunToken) Reveal() string { return t.secret }

// IsZero reports whether t carries no secret.
func (t RunToken) IsZero() bool { return t.secret == "" }

// Matches reports whether u is the same token as t, in time that does not
// depend on where they differ. A zero token matches nothing, not even
// another zero token, so a run without a token binds no call.
func (t RunToken) Matches(u RunToken) bool {
	if t.IsZero() || u.IsZero() {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(t.secret), []byte(u.secret)) == 1
}

// String returns a redacted form that says only whether t is set.
func (t RunToken) String() string {
	if t.IsZero() {
		return "RunToken(none)"
	}
	return "RunToken(redacted)"
}

// GoString is String, so that %#v does not print the secret either.
func (t RunToken) GoString() string { return t.String() }

// Format prints t as String does, whatever the verb, so that no fmt verb
// (%v, %+v, %#v, %s, %q, %x) reaches the secret.
func (t RunToken) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(t.String())) }

// MarshalJSON encodes t as a redacted string, never the secret.
func (t RunToken) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte(`""`), nil
	}
	return []byte(`"` + redacted + `"`), nil
}

// LogValue implements slog.LogValuer with the redacted form.
func (t RunToken) LogValue() slog.Value { return slog.StringValue(t.String()) }
