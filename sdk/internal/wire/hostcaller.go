package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	goplugin "github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/tracing"
	"github.com/wophost/wophost/sdk/wop"
)

// HostCaller calls the host's HostServices over the brokered connection.
//
// The host sends the connection information for its HostServices once,
// when it serves them on a broker id, and go-plugin's broker keeps that
// information for five seconds only; a later dial for the same id waits
// for information that never comes ("timeout waiting for connection
// info"). So a HostCaller starts dialling as soon as it is made, which is
// when the id arrives, rather than on first use, which may be minutes
// later.
//
// A connection is kept once made: gRPC reconnects it to the host's
// address by itself. A failed dial is never kept: the next call dials
// again, so a host that serves the id again is found. Concurrent calls
// share the one dial in flight, since only one dial can receive the
// connection information. A connection whose address refuses connections
// (gRPC's TRANSIENT_FAILURE) is dialled afresh through the broker at the
// next call, and kept as a fallback when no fresh connection information
// comes.
type HostCaller struct {
	broker   *goplugin.GRPCBroker
	id       uint32
	maxBytes int
	tracer   trace.Tracer

	mu      sync.Mutex
	conn    *grpc.ClientConn // nil until a dial succeeds
	dialing *dialAttempt     // the dial in flight, nil when none is
	closed  bool
}

// dialAttempt is one dial through the broker; done is closed when conn
// or err is set.
type dialAttempt struct {
	done chan struct{}
	conn *grpc.ClientConn
	err  error
	// waiters counts the calls that have joined this dial, guarded by the
	// caller's mu; tests read it to know that calls share the dial.
	waiters int
}

var _ wop.Caller = (*HostCaller)(nil)

// errCallerClosed is the dial error after Close.
var errCallerClosed = errors.New("the host-services caller is closed")

// NewHostCaller returns a caller for the HostServices the host serves on
// broker id, and starts dialling them at once (see HostCaller). Each call
// is a client span of tracer.
func NewHostCaller(broker *goplugin.GRPCBroker, id uint32, maxBytes int, tracer trace.Tracer) *HostCaller {
	h := &HostCaller{broker: broker, id: id, maxBytes: maxBytes, tracer: tracer}
	h.mu.Lock()
	h.startDialLocked()
	h.mu.Unlock()
	return h
}

// startDialLocked starts a dial and records it as the one in flight.
// h.mu must be held.
func (h *HostCaller) startDialLocked() *dialAttempt {
	a := &dialAttempt{done: make(chan struct{})}
	h.dialing = a
	go h.dial(a)
	return a
}

// dial runs one dial to its end, whoever still waits for it: a dial that
// has received the connection information is the only one that can use
// it, so it is not abandoned when the call that started it gives up.
func (h *HostCaller) dial(a *dialAttempt) {
	conn, err := h.broker.DialWithOptions(h.id, dialOptions(h.maxBytes)...)
	h.mu.Lock()
	h.dialing = nil
	switch {
	case err != nil:
		a.err = fmt.Errorf("dial broker id %d: %w", h.id, err)
	case h.closed:
		_ = conn.Close()
		a.err = errCallerClosed
	default:
		if h.conn != nil {
			// The address of the old connection refused connections; the
			// host has served the id again elsewhere.
			_ = h.conn.Close()
		}
		h.conn, a.conn = conn, conn
	}
	h.mu.Unlock()
	close(a.done)
}

// connect returns a connection to the host, dialling when there is none
// or the one there is cannot reach its address. It waits for a dial at
// most until ctx ends.
func (h *HostCaller) connect(ctx context.Context) (*grpc.ClientConn, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errCallerClosed
	}
	old := h.conn
	if old != nil && old.GetState() != connectivity.TransientFailure {
		h.mu.Unlock()
		return old, nil
	}
	a := h.dialing
	if a == nil {
		a = h.startDialLocked()
	}
	a.waiters++
	h.mu.Unlock()
	select {
	case <-a.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if a.err == nil {
		return a.conn, nil
	}
	if old != nil && !errors.Is(a.err, errCallerClosed) {
		// No fresh connection information: the old address is still the
		// only one the host may serve on, and gRPC keeps trying it.
		return old, nil
	}
	return nil, a.err
}

// Call implements wop.Caller. The call context carried by ctx (see
// wop.WithCallContext) travels with the call.
func (h *HostCaller) Call(ctx context.Context, family, method string, req, res any) error {
	return CallJSON(ctx, h.CallRaw, family, method, req, res)
}

// CallJSON makes a wop.Caller's call through callRaw: req marshalled to
// JSON, the result unmarshalled into res (see unmarshalResult).
func CallJSON(ctx context.Context, callRaw func(ctx context.Context, family, method string, payload []byte) ([]byte, error), family, method string, req, res any) error {
	payload, err := json.Marshal(req)
	if err != nil {
		return wop.Errorf(wop.CodeValidation, "marshal %s.%s request: %v", family, method, err)
	}
	out, err := callRaw(ctx, family, method, payload)
	if err != nil {
		return err
	}
	return unmarshalResult(family, method, out, res)
}

// CallRaw sends JSON bytes and returns the result bytes. Failures are
// *wop.Error values: unavailable (retryable) when the host cannot be
// reached, the call's own deadline_exceeded or cancelled when ctx ends
// first, and the host's envelope otherwise, with a deadline_exceeded of a
// hop further on marked retryable (see wop.HopError).
func (h *HostCaller) CallRaw(ctx context.Context, family, method string, payload []byte) (out []byte, err error) {
	call, _ := wop.CallContextFrom(ctx)
	var span trace.Span
	ctx, span, call.Traceparent = tracing.StartCall(ctx, h.tracer, call.Traceparent, "ctx", family, method, trace.SpanKindClient)
	defer func() { tracing.End(span, err, wop.CodeOf(err)) }()
	conn, err := h.connect(ctx)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			we := FromContextError(ctxErr)
			return nil, wop.Errorf(we.Code, "%s while connecting to host services", strings.TrimSuffix(we.Message, "."))
		}
		return nil, wop.Errorf(wop.CodeUnavailable, "connect to host services: %v", err).WithRetryable(true)
	}
	if d, ok := ctx.Deadline(); ok && (call.Deadline.IsZero() || d.Before(call.Deadline)) {
		call.Deadline = d
	}
	resp, err := wophostv1.NewHostServicesClient(conn).Call(ctx, &wophostv1.CallRequest{
		Family: family, Method: method, Payload: payload, Call: CallContextToProto(call),
	})
	if err != nil {
		return nil, wop.HopError(ctx, FromStatus(err))
	}
	return resp.GetResult(), nil
}

// Close closes the connection, if one was made; a dial still in flight
// closes its connection when it ends. Calls after Close fail unavailable.
func (h *HostCaller) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.conn == nil {
		return nil
	}
	conn := h.conn
	h.conn = nil
	return conn.Close()
}

// unmarshalResult decodes a host-service result into res (nil discards it).
func unmarshalResult(family, method string, data []byte, res any) error {
	if res == nil {
		return nil
	}
	if raw, ok := res.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], data...)
		return nil
	}
	if err := json.Unmarshal(data, res); err != nil {
		return wop.Errorf(wop.CodeInternal, "decode %s.%s result: %v", family, method, err)
	}
	return nil
}

// NoHost is the caller given when the host offered no HostServices; every
// call fails with capability_not_provided.
type NoHost struct{}

// Call implements wop.Caller.
func (NoHost) Call(_ context.Context, family, method string, _, _ any) error {
	return wop.NotProvided(fmt.Sprintf("host.%s.%s", family, method))
}
