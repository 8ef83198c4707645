package direct

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// handshakeTimeout bounds a caller's TLS handshake, so that a connection
// that never completes one does not hold a goroutine.
const handshakeTimeout = 10 * time.Second

// accept serves each connection l accepts until l is closed.
func (e *Endpoint) accept(l net.Listener, cfg *tls.Config) {
	for {
		nc, err := l.Accept()
		if err != nil {
			return
		}
		tc := tls.Server(nc, cfg)
		e.mu.Lock()
		if e.conns == nil {
			// Closed meanwhile.
			e.mu.Unlock()
			_ = tc.Close()
			return
		}
		e.conns[tc] = struct{}{}
		e.mu.Unlock()
		go e.serve(tc)
	}
}

// serve reads the calls of one connection, each run on a goroutine of its
// own that writes the answer, until the connection ends; its calls in
// flight are then cancelled, as the caller is gone.
func (e *Endpoint) serve(tc *tls.Conn) {
	defer func() {
		e.mu.Lock()
		delete(e.conns, tc)
		e.mu.Unlock()
		_ = tc.NetConn().Close()
	}()
	hctx, hcancel := context.WithTimeout(context.Background(), handshakeTimeout)
	err := tc.HandshakeContext(hctx)
	hcancel()
	if err != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		wmu     sync.Mutex
		mu      sync.Mutex
		running = map[uint64]context.CancelFunc{}
		held    = newUnread()
	)
	defer held.close()
	write := func(b []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		held.mu.Lock()
		closed := held.closed
		held.mu.Unlock()
		if closed {
			// An earlier write failed: the answer goes nowhere.
			return
		}
		err := tc.SetWriteDeadline(time.Now().Add(e.writeTimeout))
		if err == nil {
			_, err = tc.Write(b)
		}
		if err != nil {
			// The stream is cut mid-frame, or the caller no longer
			// reads: the connection ends, and the read below with it.
			// The socket itself, since a TLS close would first wait to
			// send a close_notify the caller does not read.
			held.close()
			_ = tc.NetConn().Close()
		}
	}
	r := bufio.NewReaderSize(tc, 32<<10)
	for {
		// A caller that does not read its answers gets no more calls
		// read until it does (unread.go).
		if !held.waitRoom(e.settings.Load().maxUnread) {
			return
		}
		f, err := readFrame(r, e.maxBytes)
		if err != nil {
			return
		}
		switch f.kind {
		case kindCall, kindRelay, kindEndRun, kindExecute:
			cctx, ccancel := context.WithCancel(ctx)
			mu.Lock()
			running[f.id] = ccancel
			mu.Unlock()
			go func() {
				a := e.answer(cctx, f)
				mu.Lock()
				delete(running, f.id)
				mu.Unlock()
				ccancel()
				n := int64(len(a.frame))
				if we := e.hold(held, a.pack, a.capability, n, e.settings.Load().maxUnread); we != nil {
					// The answer is dropped now rather than held for a
					// caller that does not read.
					a.frame = errorFrame(f.id, we, e.maxBytes)
					n = int64(len(a.frame))
					e.holdAnyway(held, a.pack, n)
				}
				write(a.frame)
				e.release(held, a.pack, n)
			}()
		case kindCancel:
			mu.Lock()
			ccancel := running[f.id]
			mu.Unlock()
			if ccancel != nil {
				ccancel()
			}
		default:
			// Not a caller of this protocol.
			return
		}
	}
}

// answered is the frame of a call's answer, with the pack whose call it
// was ("" for the host's) and the call's capability name.
type answered struct {
	frame            []byte
	pack, capability string
}

// answer runs the call frame f, a pack's or the host's, and returns the
// frame of its answer.
func (e *Endpoint) answer(ctx context.Context, f frame) answered {
	var out []byte
	var err error
	var a answered
	switch {
	case (f.kind == kindExecute) != (e.execute != nil):
		// A pack's channel runs nodes and nothing else; a plugin's
		// runs no node.
		err = errRefused(fmt.Sprintf("this channel does not serve frames of kind %d", f.kind))
	case f.kind == kindExecute:
		out, err = e.runNode(ctx, f.body)
	case f.kind == kindRelay:
		out, err = e.relayed(ctx, f.body)
	case f.kind == kindEndRun:
		out, err = e.endRun(f.body)
	default:
		req := &wophostv1.DirectChannelInvokeRequest{}
		if uerr := proto.Unmarshal(f.body, req); uerr != nil {
			a.frame = errorFrame(f.id, wop.Errorf(wop.CodeValidation, "direct channel: the call cannot be read: %v", uerr), e.maxBytes)
			return a
		}
		a.capability = "host." + req.GetFamily() + "." + req.GetMethod()
		out, a.pack, err = e.invoke(ctx, req)
	}
	var r *refusal
	switch {
	case errors.As(err, &r):
		a.frame = encodeFrame(kindRefused, f.id, []byte(r.why))
		return a
	case err != nil:
		a.frame = errorFrame(f.id, err, e.maxBytes)
		return a
	}
	body, err := proto.Marshal(&wophostv1.DirectChannelInvokeResponse{Result: out})
	if err == nil && len(body) > e.maxBytes {
		err = wop.Errorf(wop.CodeUpstreamUnavailable, "result of %d bytes is over the %d-byte message limit", len(body), e.maxBytes)
	}
	if err != nil {
		a.frame = errorFrame(f.id, err, e.maxBytes)
		return a
	}
	a.frame = encodeFrame(kindResult, f.id, body)
	return a
}

// errorFrame is the frame carrying err's envelope for call id. An
// envelope over the size limit is replaced by one that says so.
func errorFrame(id uint64, err error, maxBytes int) []byte {
	d := wire.ToDetail(err)
	body, merr := proto.Marshal(d)
	if merr != nil || len(body) > maxBytes {
		body, _ = proto.Marshal(wire.ToDetail(wop.Errorf(wop.CodeUpstreamUnavailable,
			"the call failed with %s, and its error is over the %d-byte message limit", d.GetCode(), maxBytes).WithCapability(d.GetCapability())))
	}
	return encodeFrame(kindError, id, body)
}
