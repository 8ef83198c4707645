package direct

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/tracing"
	"github.com/wophost/wophost/sdk/wop"
)

// RawCaller is the routed path: a call sent through the host.
type RawCaller interface {
	CallRaw(ctx context.Context, family, method string, payload []byte) ([]byte, error)
}

// Pool holds a pack's connections to the direct channels it is offered,
// one per endpoint, shared by all its runs. It is safe for concurrent use.
type Pool struct {
	maxBytes int

	mu    sync.Mutex
	conns map[string]*poolConn
}

// poolConn is one connection, the certificate it pins, and the calls in
// flight on it: a connection the pool lets go of is closed only once
// they are over, since closing it would cancel them.
type poolConn struct {
	conn *grpc.ClientConn
	cert string
	// inflight and dropped are guarded by the pool's mu.
	inflight int
	dropped  bool
}

// NewPool returns an empty pool whose connections bound messages to
// maxBytes.
func NewPool(maxBytes int) *Pool { return &Pool{maxBytes: maxBytes, conns: map[string]*poolConn{}} }

// Close closes every connection.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, c := range p.conns {
		_ = c.conn.Close()
		delete(p.conns, a)
	}
}

// acquire returns the pool's connection to ep, making it on first use,
// with one more call in flight on it (release ends it). It trusts ep's
// certificate and no other.
func (p *Pool) acquire(ep *wophostv1.DirectChannelEndpoint) (*poolConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[ep.GetAddress()]; ok && c.cert == string(ep.GetCertificate()) {
		c.inflight++
		return c, nil
	} else if ok {
		p.dropLocked(ep.GetAddress(), c)
	}
	// A plugin that restarted serves on a new address; the connections
	// to addresses that no longer answer go when a new one is made.
	for a, c := range p.conns {
		if s := c.conn.GetState(); s == connectivity.TransientFailure || s == connectivity.Shutdown {
			p.dropLocked(a, c)
		}
	}
	cert, err := x509.ParseCertificate(ep.GetCertificate())
	if err != nil {
		return nil, fmt.Errorf("direct channel certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	creds := credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	conn, err := grpc.NewClient("unix:"+ep.GetAddress(), append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, wire.DialOptions(p.maxBytes)...)...)
	if err != nil {
		return nil, fmt.Errorf("direct channel %s: %w", ep.GetAddress(), err)
	}
	c := &poolConn{conn: conn, cert: string(ep.GetCertificate()), inflight: 1}
	p.conns[ep.GetAddress()] = c
	return c, nil
}

// release ends a call on c; the last call on a dropped connection closes
// it.
func (p *Pool) release(c *poolConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.inflight--
	if c.dropped && c.inflight == 0 {
		_ = c.conn.Close()
	}
}

// drop lets go of c, when it is still the pool's connection to address.
func (p *Pool) drop(address string, c *poolConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropLocked(address, c)
}

func (p *Pool) dropLocked(address string, c *poolConn) {
	if p.conns[address] == c {
		delete(p.conns, address)
	}
	if !c.dropped {
		c.dropped = true
		if c.inflight == 0 {
			_ = c.conn.Close()
		}
	}
}

// Caller makes one run's host-service calls: a call to a family of a
// channel the host offered goes to its plugin directly, with the grant;
// every other call, and every call a channel cannot take (its plugin
// gone, its grant revoked), goes through the host.
type Caller struct {
	routed   RawCaller
	pool     *Pool
	tracer   trace.Tracer
	byFamily map[string]*channel
}

// channel is one offered channel as a run uses it.
type channel struct {
	endpoint *wophostv1.DirectChannelEndpoint
	grant    []byte
	// closed is set once the channel failed the run: its later calls go
	// through the host.
	closed atomic.Bool
}

var _ wop.Caller = (*Caller)(nil)

// NewCaller returns the caller of a run offered channels; without offers
// every call takes the routed path.
func NewCaller(routed RawCaller, pool *Pool, offers []*wophostv1.DirectChannelOffer, tracer trace.Tracer) *Caller {
	c := &Caller{routed: routed, pool: pool, tracer: tracer, byFamily: map[string]*channel{}}
	for _, o := range offers {
		if o.GetEndpoint().GetAddress() == "" || len(o.GetGrant()) == 0 {
			continue
		}
		ch := &channel{endpoint: o.GetEndpoint(), grant: o.GetGrant()}
		for _, f := range o.GetFamilies() {
			c.byFamily[f] = ch
		}
	}
	return c
}

// Call implements wop.Caller.
func (c *Caller) Call(ctx context.Context, family, method string, req, res any) error {
	return wire.CallJSON(ctx, c.CallRaw, family, method, req, res)
}

// CallRaw sends JSON bytes and returns the result bytes, on the family's
// channel when the run has one and it takes the call, else through the
// host. Failures are *wop.Error values, as the routed path gives them.
func (c *Caller) CallRaw(ctx context.Context, family, method string, payload []byte) ([]byte, error) {
	ch := c.byFamily[family]
	if ch == nil || ch.closed.Load() {
		return c.routed.CallRaw(ctx, family, method, payload)
	}
	out, err, routed := c.direct(ctx, ch, family, method, payload)
	if routed {
		return c.routed.CallRaw(ctx, family, method, payload)
	}
	return out, err
}

// direct makes one call on ch. routed reports that the call was not made
// there (the channel unreachable, the grant refused) and may go through
// the host.
func (c *Caller) direct(ctx context.Context, ch *channel, family, method string, payload []byte) (out []byte, err error, routed bool) {
	call, _ := wop.CallContextFrom(ctx)
	ctx, span, traceparent := tracing.StartCall(ctx, c.tracer, call.Traceparent, "ctx", family, method, trace.SpanKindClient)
	defer func() { tracing.End(span, err, wop.CodeOf(err)) }()
	pc, cerr := c.pool.acquire(ch.endpoint)
	if cerr != nil {
		ch.closed.Store(true)
		return nil, nil, true
	}
	defer c.pool.release(pc)
	conn := pc.conn
	// A call is sent only on a connection that is up, so that a failure
	// after sending means the plugin went away during the call, which is
	// not retried: the call may have had its effects.
	if err := ready(ctx, conn); err != nil {
		if ctx.Err() != nil {
			return nil, wire.FromContextError(ctx.Err()), false
		}
		ch.closed.Store(true)
		c.pool.drop(ch.endpoint.GetAddress(), pc)
		return nil, nil, true
	}
	resp, err := wophostv1.NewDirectChannelClient(conn).Invoke(withoutDeadline(ctx), &wophostv1.DirectChannelInvokeRequest{
		Family: family, Method: method, Payload: payload, Grant: ch.grant, Traceparent: traceparent,
	})
	switch {
	case err == nil:
		return resp.GetResult(), nil, false
	case IsRefused(err):
		ch.closed.Store(true)
		return nil, nil, true
	}
	we := wire.FromStatus(err)
	if st, ok := status.FromError(err); ctx.Err() == nil && ok && len(st.Details()) == 0 &&
		(st.Code() == codes.Unavailable || st.Code() == codes.Canceled) {
		// A failure with no envelope that the caller did not cause is the
		// transport's: the plugin went away (or its connection closed)
		// during the call, which the host's router reports the same way.
		ch.closed.Store(true)
		c.pool.drop(ch.endpoint.GetAddress(), pc)
		capability := "host." + family + "." + method
		return nil, wop.Errorf(wop.CodeUnavailable, "%s: the plugin went away during the call", capability).WithCapability(capability).WithRetryable(true), false
	}
	return nil, wop.HopError(ctx, we), false
}

// withoutDeadline returns a context that ends when ctx does but has no
// deadline, so that gRPC sends the call without a timeout. The grant
// carries the run's deadline and the plugin's SDK sets it on the
// handler's context, to the nanosecond; sent as well, gRPC's timeout would
// make the plugin arm a second timer for every call, which measured about
// 5 µs of the plugin's CPU per call. Cancellation still reaches the plugin.
func withoutDeadline(ctx context.Context) context.Context {
	if _, ok := ctx.Deadline(); !ok {
		return ctx
	}
	return detached{ctx}
}

// detached is a context with the values and the end of its parent, but
// not its deadline.
type detached struct{ context.Context }

func (detached) Deadline() (time.Time, bool) { return time.Time{}, false }

// ready waits until conn is connected, or fails when it cannot connect.
func ready(ctx context.Context, conn *grpc.ClientConn) error {
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure, connectivity.Shutdown:
			return fmt.Errorf("direct channel is %s", s)
		case connectivity.Idle:
			conn.Connect()
		}
		if !conn.WaitForStateChange(ctx, s) {
			return ctx.Err()
		}
	}
}
