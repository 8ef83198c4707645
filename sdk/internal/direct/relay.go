package direct

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// relayContext separates a relayed call's MAC from a grant's, which is
// made with the same key: neither can stand for the other.
const relayContext = "wophost-direct relay\x00"

// relayMAC is the MAC of a relayed call's InvokeRequest bytes.
func relayMAC(key, invoke []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(relayContext))
	m.Write(invoke)
	return m.Sum(nil)
}

// Relay is the host's side of a plugin's channel: the calls the host
// relays to the plugin (a node's calls on the routed path, an operator's)
// travel on it instead of the plugin's gRPC connection, each as the
// InvokeRequest the host would have sent there, under a MAC made with the
// channel's key, which only the host and the plugin process hold. The
// host has made its checks; the plugin runs the call as it runs Invoke.
// It is safe for concurrent use.
type Relay struct {
	ep   *wophostv1.DirectChannelEndpoint
	pool *Pool

	mu  sync.Mutex
	key []byte
}

// NewRelay returns the relay to the channel at ep, whose key is key. It
// connects on the first call.
func NewRelay(ep *wophostv1.DirectChannelEndpoint, key []byte, maxBytes int) *Relay {
	return &Relay{ep: ep, pool: NewPool(maxBytes), key: key}
}

// Rekey sets the key of a new configuration of the same plugin process.
// The calls in flight keep their connection.
func (r *Relay) Rekey(key []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.key = key
}

// Close closes the relay's connection, ending the calls in flight on it.
func (r *Relay) Close() { r.pool.Close() }

// Invoke sends req on the channel and returns the plugin's result or its
// *wop.Error. sent is false when the call did not reach the plugin (the
// channel unreachable, the key refused): it may then go on the plugin's
// gRPC connection. A channel that closes during the call fails it as
// unavailable, retryable, as the gRPC connection would.
func (r *Relay) Invoke(ctx context.Context, req *wophostv1.InvokeRequest) (out []byte, sent bool, err error) {
	pc, err := r.pool.acquire(ctx, r.ep)
	if err != nil {
		if ctx.Err() != nil {
			return nil, true, wire.FromContextError(ctx.Err())
		}
		return nil, false, nil
	}
	defer r.pool.release(pc)
	body, err := proto.Marshal(req)
	if err != nil {
		return nil, true, wop.Errorf(wop.CodeInternal, "relay: encode call: %v", err)
	}
	r.mu.Lock()
	key := r.key
	r.mu.Unlock()
	out, err = pc.conn.roundTrip(ctx, kindRelay, append(relayMAC(key, body), body...))
	var we *wop.Error
	switch {
	case notRun(err):
		return nil, false, nil
	case errors.As(err, &we):
		return nil, true, we
	case err != nil && ctx.Err() != nil:
		return nil, true, wire.FromContextError(ctx.Err())
	case err != nil:
		return nil, true, wop.Errorf(wop.CodeUnavailable, "the plugin's channel closed during the call").WithRetryable(true)
	}
	return out, true, nil
}

// relayed runs a call the host relayed, when its MAC holds under the
// current key.
func (e *Endpoint) relayed(ctx context.Context, body []byte) ([]byte, error) {
	if len(body) < sha256.Size {
		return nil, errRefused("a relayed call without its MAC")
	}
	sum, invoke := body[:sha256.Size], body[sha256.Size:]
	e.mu.Lock()
	key := e.key
	e.mu.Unlock()
	if key == nil || !hmac.Equal(sum, relayMAC(key, invoke)) {
		return nil, errRefused("a relayed call not signed with the channel's key")
	}
	req := &wophostv1.InvokeRequest{}
	if err := proto.Unmarshal(invoke, req); err != nil {
		return nil, wop.Errorf(wop.CodeValidation, "relayed call cannot be read: %v", err)
	}
	return e.handle(ctx, req.GetFamily(), req.GetMethod(), req.GetPayload(), wire.CallContextFromProto(req.GetCall()))
}
