package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	goplugin "github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/tracing"
	"github.com/wophost/wophost/sdk/wop"
)

// HostCaller calls the host's HostServices over the brokered connection.
// It dials once, on first use, and keeps the connection.
type HostCaller struct {
	broker   *goplugin.GRPCBroker
	id       uint32
	maxBytes int
	tracer   trace.Tracer

	once   sync.Once
	conn   *grpc.ClientConn
	client wophostv1.HostServicesClient
	err    error
}

var _ wop.Caller = (*HostCaller)(nil)

// NewHostCaller returns a caller for the HostServices the host serves on
// broker id. Each call is a client span of tracer.
func NewHostCaller(broker *goplugin.GRPCBroker, id uint32, maxBytes int, tracer trace.Tracer) *HostCaller {
	return &HostCaller{broker: broker, id: id, maxBytes: maxBytes, tracer: tracer}
}

func (h *HostCaller) dial() (wophostv1.HostServicesClient, error) {
	h.once.Do(func() {
		h.conn, h.err = h.broker.DialWithOptions(h.id, DialOptions(h.maxBytes)...)
		if h.err == nil {
			h.client = wophostv1.NewHostServicesClient(h.conn)
		}
	})
	return h.client, h.err
}

// Call implements wop.Caller. The call context carried by ctx (see
// wop.WithCallContext) travels with the call.
func (h *HostCaller) Call(ctx context.Context, family, method string, req, res any) error {
	payload, err := json.Marshal(req)
	if err != nil {
		return wop.Errorf(wop.CodeValidation, "marshal %s.%s request: %v", family, method, err)
	}
	out, err := h.CallRaw(ctx, family, method, payload)
	if err != nil {
		return err
	}
	return UnmarshalResult(family, method, out, res)
}

// CallRaw sends JSON bytes and returns the result bytes.
func (h *HostCaller) CallRaw(ctx context.Context, family, method string, payload []byte) (out []byte, err error) {
	call, _ := wop.CallContextFrom(ctx)
	ctx, span, traceparent := tracing.Start(ctx, h.tracer, call.Traceparent, "ctx "+family+"."+method, trace.SpanKindClient)
	defer func() { tracing.End(span, err, wop.CodeOf(err)) }()
	call.Traceparent = traceparent
	client, err := h.dial()
	if err != nil {
		return nil, wop.Errorf(wop.CodeUnavailable, "connect to host services: %v", err).WithRetryable(true)
	}
	if d, ok := ctx.Deadline(); ok && (call.Deadline.IsZero() || d.Before(call.Deadline)) {
		call.Deadline = d
	}
	resp, err := client.Call(ctx, &wophostv1.CallRequest{
		Family: family, Method: method, Payload: payload, Call: CallContextToProto(call),
	})
	if err != nil {
		return nil, FromStatus(err)
	}
	return resp.GetResult(), nil
}

// Close closes the connection, if one was made.
func (h *HostCaller) Close() error {
	if h.conn != nil {
		return h.conn.Close()
	}
	return nil
}

// UnmarshalResult decodes a host-service result into res (nil discards it).
func UnmarshalResult(family, method string, data []byte, res any) error {
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
