package wop

import "context"

// Caller makes one host-service call: it marshals req to JSON, sends it as
// family.method through the host, and unmarshals the result into res (a
// pointer, or nil to discard it). Failures are *Error values.
type Caller interface {
	Call(ctx context.Context, family, method string, req, res any) error
}

type callContextKey struct{}

// WithCallContext returns a context carrying c, so that a host-service call
// made with it travels as part of the same node run.
func WithCallContext(ctx context.Context, c CallContext) context.Context {
	return context.WithValue(ctx, callContextKey{}, c)
}

// CallContextFrom returns the call context ctx carries, if any.
func CallContextFrom(ctx context.Context) (CallContext, bool) {
	c, ok := ctx.Value(callContextKey{}).(CallContext)
	return c, ok
}
