package direct

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// relayContext separates a relayed call's MAC from a grant's, which is
// made with the same key: neither can stand for the other.
const relayContext = "wophost-direct relay\x00"

// endRunContext separates the MAC of a run's end from a relayed call's
// and a grant's: none can stand for another.
const endRunContext = "wophost-direct end run\x00"

// relayMAC is the MAC of a relayed call's InvokeRequest bytes.
func relayMAC(key, invoke []byte) []byte { return macOf(key, relayContext, invoke) }

// endRunMAC is the MAC of an EndRunRequest's bytes.
func endRunMAC(key, end []byte) []byte { return macOf(key, endRunContext, end) }

func macOf(key []byte, context string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(context))
	m.Write(body)
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
	body, err := proto.Marshal(req)
	if err != nil {
		return nil, true, wop.Errorf(wop.CodeInternal, "relay: encode call: %v", err)
	}
	out, sent, err = r.roundTrip(ctx, kindRelay, body)
	return out, sent, pluginGone(err, "the call")
}

// EndRun ends a run on the channel: the plugin refuses the run's grants
// from then on and answers the calls the run made there, as the gRPC
// EndRun does, without its round trip through gRPC's goroutines. sent is
// false when the request did not reach the plugin (the channel
// unreachable, the key refused, or a plugin built before version 2 of the
// framing): it may then go on gRPC.
func (r *Relay) EndRun(ctx context.Context, req *wophostv1.EndRunRequest) (resp *wophostv1.EndRunResponse, sent bool, err error) {
	what := "the end of run " + req.GetRunId()
	resp = &wophostv1.EndRunResponse{}
	if sent, err = r.exchange(ctx, kindEndRun, req, resp, what); err != nil || !sent {
		return nil, sent, pluginGone(err, what)
	}
	return resp, true, nil
}

// pluginGone is err as a plugin's caller gets it: a channel that closed
// during what fails it as unavailable, retryable, as the plugin's gRPC
// connection would.
func pluginGone(err error, what string) error {
	if errors.Is(err, ErrGone) {
		return wop.Errorf(wop.CodeUnavailable, "the plugin's channel closed during %s", what).WithRetryable(true)
	}
	return err
}

// exchange sends req as a frame of kind and reads the answer into resp,
// as roundTrip sorts the outcome; what names the message in failures.
func (r *Relay) exchange(ctx context.Context, kind frameKind, req, resp proto.Message, what string) (sent bool, err error) {
	body, err := proto.Marshal(req)
	if err != nil {
		return true, wop.Errorf(wop.CodeInternal, "relay: encode %s: %v", what, err)
	}
	out, sent, err := r.roundTrip(ctx, kind, body)
	if err != nil || !sent {
		return sent, err
	}
	if err := proto.Unmarshal(out, resp); err != nil {
		return true, wop.Errorf(wop.CodeInternal, "relay: %s answered unreadably: %v", what, err)
	}
	return true, nil
}

// roundTrip sends body, under its MAC for kind, on the channel and sorts
// the outcome: sent is false when it did not reach the peer, and err is
// ErrGone when the channel closed meanwhile.
func (r *Relay) roundTrip(ctx context.Context, kind frameKind, body []byte) (out []byte, sent bool, err error) {
	pc, err := r.pool.acquire(ctx, r.ep)
	if err != nil {
		if ctx.Err() != nil {
			return nil, true, wire.FromContextError(ctx.Err())
		}
		return nil, false, nil
	}
	defer r.pool.release(pc)
	r.mu.Lock()
	key := r.key
	r.mu.Unlock()
	var sum []byte
	switch kind {
	case kindRelay:
		sum = relayMAC(key, body)
	case kindExecute:
		sum = executeMAC(key, body)
	default:
		if pc.conn.protocol != ALPN {
			// A plugin built before version 2 has no kindEndRun.
			return nil, false, nil
		}
		sum = endRunMAC(key, body)
	}
	out, err = pc.conn.roundTrip(ctx, kind, append(sum, body...))
	var we *wop.Error
	switch {
	case notRun(err):
		return nil, false, nil
	case errors.As(err, &we):
		return nil, true, we
	case err != nil && ctx.Err() != nil:
		return nil, true, wire.FromContextError(ctx.Err())
	case err != nil:
		// The channel closed during the call: each caller says so in its
		// own terms (pluginGone; a pack that went away, for a node run).
		return nil, true, ErrGone
	}
	return out, true, nil
}

// relayed runs a call the host relayed, when its MAC holds under the
// current key.
func (e *Endpoint) relayed(ctx context.Context, body []byte) ([]byte, error) {
	invoke, err := e.unsign(body, relayMAC, "a relayed call")
	if err != nil {
		return nil, err
	}
	req := &wophostv1.InvokeRequest{}
	if err := proto.Unmarshal(invoke, req); err != nil {
		return nil, wop.Errorf(wop.CodeValidation, "relayed call cannot be read: %v", err)
	}
	return e.handle(ctx, req.GetFamily(), req.GetMethod(), req.GetPayload(), wire.CallContextFromProto(req.GetCall()))
}

// endRun ends the run a kindEndRun frame's body asks for, when its MAC
// holds under the current key, and answers the EndRunResponse's bytes.
func (e *Endpoint) endRun(body []byte) ([]byte, error) {
	end, err := e.unsign(body, endRunMAC, "the end of a run")
	if err != nil {
		return nil, err
	}
	req := &wophostv1.EndRunRequest{}
	if err := proto.Unmarshal(end, req); err != nil {
		return nil, wop.Errorf(wop.CodeValidation, "the end of a run cannot be read: %v", err)
	}
	return proto.Marshal(e.EndRun(req.GetRunId(), time.Unix(0, req.GetDeadlineUnixNano())))
}

// unsign answers the message of a frame's body signed by the host: the
// MAC's 32 bytes, made by mac under the current key, then the message.
// what names the frame in a refusal.
func (e *Endpoint) unsign(body []byte, mac func(key, msg []byte) []byte, what string) ([]byte, error) {
	if len(body) < sha256.Size {
		return nil, errRefused(what + " without its MAC")
	}
	sum, msg := body[:sha256.Size], body[sha256.Size:]
	e.mu.Lock()
	key := e.key
	e.mu.Unlock()
	if key == nil || !hmac.Equal(sum, mac(key, msg)) {
		return nil, errRefused(what + " not signed with the channel's key")
	}
	return msg, nil
}
