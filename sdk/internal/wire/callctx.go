package wire

import (
	"context"
	"time"

	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// CallContextToProto converts a call context for the wire.
func CallContextToProto(c wop.CallContext) *wophostv1.CallContext {
	p := &wophostv1.CallContext{
		RunId:          c.RunID,
		NodeId:         c.NodeID,
		TypeId:         c.TypeID,
		Pack:           c.Pack,
		Caller:         c.Caller,
		Depth:          uint32(max(c.Depth, 0)),
		Traceparent:    c.Traceparent,
		IdempotencyKey: c.IdempotencyKey,
		RunToken:       c.Token.Reveal(),
	}
	if !c.Deadline.IsZero() {
		p.DeadlineUnixNano = c.Deadline.UnixNano()
	}
	return p
}

// CallContextFromProto converts a call context from the wire. A nil p gives
// the zero value.
func CallContextFromProto(p *wophostv1.CallContext) wop.CallContext {
	if p == nil {
		return wop.CallContext{}
	}
	c := wop.CallContext{
		RunID:          p.GetRunId(),
		NodeID:         p.GetNodeId(),
		TypeID:         p.GetTypeId(),
		Pack:           p.GetPack(),
		Caller:         p.GetCaller(),
		Depth:          int(p.GetDepth()),
		Traceparent:    p.GetTraceparent(),
		IdempotencyKey: p.GetIdempotencyKey(),
		Token:          wop.NewRunToken(p.GetRunToken()),
	}
	if p.GetDeadlineUnixNano() != 0 {
		c.Deadline = time.Unix(0, p.GetDeadlineUnixNano())
	}
	return c
}

// WithCallDeadline derives a context that ends at the call context's
// deadline as well as at ctx's own.
func WithCallDeadline(ctx context.Context, c wop.CallContext) (context.Context, context.CancelFunc) {
	if c.Deadline.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, c.Deadline)
}
