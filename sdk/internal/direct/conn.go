package direct

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// errNotSent is a call the connection could not take because it had
// already failed: nothing reached the plugin, so the call may go through
// the host instead.
var errNotSent = errors.New("direct channel: the connection is closed")

// ErrGone is a call whose connection ended after the call was sent: the
// peer may have run it, so it is not sent again.
var ErrGone = errors.New("direct channel: the connection closed during the call")

// conn is a pack's connection to one plugin's channel. Its calls are
// multiplexed: each caller writes its own call and waits for the answer,
// which one reading goroutine hands over.
type conn struct {
	nc net.Conn
	// protocol is the version of the framing the handshake agreed on.
	protocol string
	maxBytes int
	ids      atomic.Uint64
	// writeTimeout bounds each write: a peer that stops reading fails the
	// connection instead of holding its callers.
	writeTimeout time.Duration

	// wmu keeps each frame whole on the stream.
	wmu sync.Mutex

	mu      sync.Mutex
	pending map[uint64]chan frame
	err     error
	// done is closed once err is set.
	done chan struct{}
}

// dial connects to the channel at ep, trusting its certificate and no
// other, and agrees on the framing's version.
func dial(ctx context.Context, ep *wophostv1.DirectChannelEndpoint, maxBytes int) (*conn, error) {
	cert, err := x509.ParseCertificate(ep.GetCertificate())
	if err != nil {
		return nil, fmt.Errorf("direct channel certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	var d net.Dialer
	raw, err := d.DialContext(ctx, "unix", ep.GetAddress())
	if err != nil {
		return nil, fmt.Errorf("direct channel %s: %w", ep.GetAddress(), err)
	}
	tc := tls.Client(raw, &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS13, NextProtos: protocols()})
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("direct channel %s: %w", ep.GetAddress(), err)
	}
	p := tc.ConnectionState().NegotiatedProtocol
	if !slices.Contains(protocols(), p) {
		_ = raw.Close()
		return nil, fmt.Errorf("direct channel %s: the plugin speaks %q, not one of %q", ep.GetAddress(), p, protocols())
	}
	c := &conn{nc: tc, protocol: p, maxBytes: maxBytes, writeTimeout: writeTimeout, pending: map[uint64]chan frame{}, done: make(chan struct{})}
	go c.read()
	return c, nil
}

// read hands each answer to its caller until the connection fails.
func (c *conn) read() {
	r := bufio.NewReaderSize(c.nc, 32<<10)
	for {
		f, err := readFrame(r, c.maxBytes)
		if err != nil {
			c.fail(err)
			return
		}
		c.mu.Lock()
		ch := c.pending[f.id]
		delete(c.pending, f.id)
		c.mu.Unlock()
		if ch != nil {
			ch <- f
		}
	}
}

// fail closes the connection for good; calls waiting on it end with
// ErrGone.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
	c.mu.Unlock()
	// The socket itself: closing the TLS connection would first send a
	// close_notify, which waits on a peer that may not read.
	_ = c.nc.(*tls.Conn).NetConn().Close()
}

// failed reports whether the connection has failed.
func (c *conn) failed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// close ends the connection and every call on it.
func (c *conn) close() { c.fail(net.ErrClosed) }

// write writes one frame whole within the write timeout. A write that
// fails leaves the stream cut mid-frame: it fails the connection. The
// caller's own deadline does not bound it, since other calls share the
// connection; the caller stops waiting for its answer at its deadline.
func (c *conn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err := c.nc.SetWriteDeadline(time.Now().Add(c.writeTimeout))
	if err == nil {
		_, err = c.nc.Write(b)
	}
	if err != nil {
		c.fail(err)
	}
	return err
}

// call sends a pack's call and returns its outcome (see roundTrip).
func (c *conn) call(ctx context.Context, req *wophostv1.DirectChannelInvokeRequest) ([]byte, error) {
	body, err := proto.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("direct channel: encode call: %w", err)
	}
	return c.roundTrip(ctx, kindCall, body)
}

// roundTrip sends a call frame of kind and returns the call's result, or
// its failure: a *wop.Error (the call's own, or a request over the size
// limit), a failure for which notRun holds, ErrGone, or ctx's error.
func (c *conn) roundTrip(ctx context.Context, kind frameKind, body []byte) ([]byte, error) {
	f, err := c.send(ctx, kind, body)
	if err != nil {
		return nil, err
	}
	return outcome(f)
}

// notRun reports whether a call's failure means the plugin did not run
// it (the connection had failed before it, or the plugin refused its
// grant or MAC), so that it may go through the host or on gRPC instead.
func notRun(err error) bool {
	var r *refusal
	return errors.Is(err, errNotSent) || errors.As(err, &r)
}

// send sends a call frame of kind and waits for its answer frame. It
// fails with errNotSent when the connection had failed before, ErrGone
// when it fails during the call, a *wop.Error when body is over the
// message size limit, and ctx's error when the caller gives up, in which
// case the plugin is told to stop the call.
func (c *conn) send(ctx context.Context, kind frameKind, body []byte) (frame, error) {
	if len(body) > c.maxBytes {
		return frame{}, wop.Errorf(wop.CodeValidation, "request of %d bytes is over the %d-byte message limit", len(body), c.maxBytes)
	}
	id := c.ids.Add(1)
	answer := make(chan frame, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return frame{}, errNotSent
	}
	c.pending[id] = answer
	c.mu.Unlock()
	if err := c.write(encodeFrame(kind, id, body)); err != nil {
		return frame{}, ErrGone
	}
	select {
	case f := <-answer:
		return f, nil
	case <-c.done:
		select {
		case f := <-answer:
			return f, nil
		default:
			return frame{}, ErrGone
		}
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		// Best effort: a connection that cannot carry the cancel has
		// failed, and the plugin's side ends the call with it.
		_ = c.write(encodeFrame(kindCancel, id, nil))
		return frame{}, ctx.Err()
	}
}
