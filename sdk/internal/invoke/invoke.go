// Package invoke is the one invocation path of the SDK's servers: a plugin
// method and a pack node are run, their failures mapped to the error
// envelope, and their results encoded and bounded by the same code.
package invoke

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/sdk/internal/wire"
	"github.com/wophost/wophost/sdk/wop"
)

// Safely runs fn and turns a panic into an internal error, logged with its
// stack; what names the code that panicked ("handler", "node").
func Safely(logger hclog.Logger, what string, fn func() (any, error)) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			logger.Error(what+" panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = wop.Errorf(wop.CodeInternal, "%s panicked: %v", what, r)
		}
	}()
	return fn()
}

// Failure is the envelope of err, returned by code that ran under ctx. A
// plain error that came with ctx ending is the deadline or the
// cancellation that caused it, not internal: code that returns ctx.Err()
// wrapped, or fails on a closed connection, reports why it stopped.
func Failure(ctx context.Context, err error) *wop.Error {
	we := wire.FromContextError(err)
	if ctx.Err() != nil && we.Code == wop.CodeInternal {
		we = wire.FromContextError(ctx.Err())
	}
	return we
}

// Result encodes out, what a method or node returned, as the JSON it
// answers with. nil and an empty json.RawMessage are null; a
// json.RawMessage is sent as it is, once checked to be JSON. An encoding
// that cannot be made is internal; one over maxBytes (when maxBytes > 0)
// is upstream_unavailable, the code the host gives an oversized answer it
// notices itself. what names the result in messages.
func Result(out any, maxBytes int, what string) ([]byte, *wop.Error) {
	var b []byte
	switch r := out.(type) {
	case nil:
		b = []byte("null")
	case json.RawMessage:
		if len(r) == 0 {
			b = []byte("null")
		} else if !json.Valid(r) {
			return nil, wop.Errorf(wop.CodeInternal, "%s is not valid JSON", what)
		} else {
			b = r
		}
	default:
		var err error
		if b, err = json.Marshal(out); err != nil {
			return nil, wop.Errorf(wop.CodeInternal, "encode %s: %v", what, err)
		}
	}
	if maxBytes > 0 && len(b) > maxBytes {
		return nil, wop.Errorf(wop.CodeUpstreamUnavailable, "%s is %d bytes, over the %d-byte limit", what, len(b), maxBytes)
	}
	return b, nil
}
