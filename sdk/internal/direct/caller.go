package direct

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

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
	conn *conn
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
		c.conn.close()
		delete(p.conns, a)
	}
}

// acquire returns the pool's connection to ep, connecting on first use,
// with one more call in flight on it (release ends it). It trusts ep's
// certificate and no other.
func (p *Pool) acquire(ctx context.Context, ep *wophostv1.DirectChannelEndpoint) (*poolConn, error) {
	if c := p.take(ep); c != nil {
		return c, nil
	}
	// Connecting takes a TLS handshake: other runs' calls on other
	// connections do not wait for it.
	nc, err := dial(ctx, ep, p.maxBytes)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[ep.GetAddress()]; ok && c.cert == string(ep.GetCertificate()) && !c.conn.failed() {
		// Another call connected first.
		nc.close()
		c.inflight++
		return c, nil
	} else if ok {
		p.dropLocked(ep.GetAddress(), c)
	}
	c := &poolConn{conn: nc, cert: string(ep.GetCertificate()), inflight: 1}
	p.conns[ep.GetAddress()] = c
	return c, nil
}

// take returns the pool's working connection to ep with one more call in
// flight on it, or nil when there is none. A plugin that restarted serves
// on a new address; the connections that failed go here.
func (p *Pool) take(ep *wophostv1.DirectChannelEndpoint) *poolConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, c := range p.conns {
		if c.conn.failed() {
			p.dropLocked(a, c)
		}
	}
	c, ok := p.conns[ep.GetAddress()]
	if !ok {
		return nil
	}
	if c.cert != string(ep.GetCertificate()) {
		p.dropLocked(ep.GetAddress(), c)
		return nil
	}
	c.inflight++
	return c
}

// release ends a call on c; the last call on a dropped connection closes
// it.
func (p *Pool) release(c *poolConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.inflight--
	if c.dropped && c.inflight == 0 {
		c.conn.close()
	}
}

func (p *Pool) dropLocked(address string, c *poolConn) {
	if p.conns[address] == c {
		delete(p.conns, address)
	}
	if !c.dropped {
		c.dropped = true
		if c.inflight == 0 {
			c.conn.close()
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
	// account, when the host asked for one, keeps the run's calls on the
	// channels for the node's answer.
	account *Account
	// callTimeout, when set, bounds each call made on a channel (the
	// host's call_timeout, for a run without a caller's deadline).
	callTimeout time.Duration
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
// every call takes the routed path. account, when not nil, keeps each
// call made on a channel and its outcome.
func NewCaller(routed RawCaller, pool *Pool, offers []*wophostv1.DirectChannelOffer, tracer trace.Tracer, account *Account) *Caller {
	c := &Caller{routed: routed, pool: pool, tracer: tracer, byFamily: map[string]*channel{}, account: account}
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

// BoundCalls bounds each call made on a channel to d from its start (0:
// no bound but the run's deadline). A hung plugin then answers a run
// without a caller's deadline at d, as the host's routed calls do.
func (c *Caller) BoundCalls(d time.Duration) { c.callTimeout = d }

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
	entry, open := c.account.begin(family, method, payload)
	if !open {
		return c.routed.CallRaw(ctx, family, method, payload)
	}
	out, err, routed := c.direct(ctx, ch, family, method, payload)
	if routed {
		c.account.skip(entry)
		return c.routed.CallRaw(ctx, family, method, payload)
	}
	c.account.end(entry, out, err)
	return out, err
}

// direct makes one call on ch. routed reports that the call was not made
// there (the channel unreachable, the grant refused) and may go through
// the host.
func (c *Caller) direct(ctx context.Context, ch *channel, family, method string, payload []byte) (out []byte, err error, routed bool) {
	call, _ := wop.CallContextFrom(ctx)
	ctx, span, traceparent := tracing.StartCall(ctx, c.tracer, call.Traceparent, "ctx", family, method, trace.SpanKindClient)
	defer func() { tracing.End(span, err, wop.CodeOf(err)) }()
	if c.callTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.callTimeout)
		defer cancel()
	}
	pc, cerr := c.pool.acquire(ctx, ch.endpoint)
	if cerr != nil {
		if ctx.Err() != nil {
			return nil, wire.FromContextError(ctx.Err()), false
		}
		ch.closed.Store(true)
		return nil, nil, true
	}
	defer c.pool.release(pc)
	// The grant carries the run's deadline; the call carries its own when
	// it has one (the caller's, or callTimeout's), so that the plugin's
	// handler gets the sooner of the two. The caller's cancellation
	// reaches the plugin as a cancel frame.
	// A connection that failed leaves the pool at its next acquire.
	req := &wophostv1.DirectChannelInvokeRequest{
		Family: family, Method: method, Payload: payload, Grant: ch.grant, Traceparent: traceparent,
	}
	if d, ok := ctx.Deadline(); ok {
		req.DeadlineUnixNano = d.UnixNano()
	}
	out, err = pc.conn.call(ctx, req)
	var we *wop.Error
	switch {
	case notRun(err):
		ch.closed.Store(true)
		return nil, nil, true
	case errors.As(err, &we):
		return nil, wop.HopError(ctx, we), false
	case err != nil && ctx.Err() != nil:
		return nil, wop.HopError(ctx, wire.FromContextError(ctx.Err())), false
	case err != nil:
		// The plugin went away (or its connection closed) during the
		// call, which the host's router reports the same way; the call
		// may have had its effects, so it is not sent again.
		ch.closed.Store(true)
		capability := "host." + family + "." + method
		return nil, wop.Errorf(wop.CodeUnavailable, "%s: the plugin went away during the call", capability).WithCapability(capability).WithRetryable(true), false
	}
	return out, nil, false
}

// outcome reads an answer frame: the call's result, its error (a
// *wop.Error), or the refusal of its grant (a *refusal).
func outcome(f frame) ([]byte, error) {
	switch f.kind {
	case kindResult:
		resp := &wophostv1.DirectChannelInvokeResponse{}
		if err := proto.Unmarshal(f.body, resp); err != nil {
			return nil, wop.Errorf(wop.CodeInternal, "direct channel: unreadable result: %v", err)
		}
		return resp.GetResult(), nil
	case kindError:
		d := &wophostv1.ErrorDetail{}
		if err := proto.Unmarshal(f.body, d); err != nil {
			return nil, wop.Errorf(wop.CodeInternal, "direct channel: unreadable error: %v", err)
		}
		return nil, wire.FromDetail(d)
	case kindRefused:
		return nil, errRefused(string(f.body))
	}
	return nil, wop.Errorf(wop.CodeInternal, "direct channel: answer of unknown kind %d", f.kind)
}
