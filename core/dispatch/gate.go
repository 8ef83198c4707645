package dispatch

import (
	"context"
	"fmt"
	"sync"

	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/wop"
)

// Gate is the way in to one plugin process. It counts the calls in flight
// and lets the host drain the process before stopping it: once closed, a
// gate lets no new call reach the process. The calls that arrive then wait
// for the gate to be handed over to the process that replaces it (and go
// there), or are refused as retryable unavailable when there is none, or
// when their deadline comes first.
type Gate struct {
	inv        registry.Invoker
	capability string

	mu       sync.Mutex
	inFlight int
	closed   bool
	idle     chan struct{} // closed when closed and inFlight reaches zero
	// handed is closed once successor is settled: the next process's way
	// in, or nil when there is none.
	handed    chan struct{}
	settled   bool
	successor registry.Invoker
}

// NewGate returns an open gate in front of inv; capability names the
// capability block in errors.
func NewGate(inv registry.Invoker, capability string) *Gate {
	return &Gate{inv: inv, capability: capability, idle: make(chan struct{}), handed: make(chan struct{})}
}

// Invoke implements registry.Invoker.
func (g *Gate) Invoke(ctx context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return g.forward(ctx, family, method, payload, call)
	}
	g.inFlight++
	g.mu.Unlock()
	defer g.leave()
	return g.inv.Invoke(ctx, family, method, payload, call)
}

// forward waits for the gate's successor and sends the call there.
func (g *Gate) forward(ctx context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
	capability := fmt.Sprintf("host.%s.%s", family, method)
	select {
	case <-g.handed:
	case <-ctx.Done():
		return nil, wop.Errorf(wop.CodeUnavailable, "capability %q is being replaced and its successor was not ready before the call's deadline", g.capability).
			WithCapability(capability).WithRetryable(true)
	}
	g.mu.Lock()
	next := g.successor
	g.mu.Unlock()
	if next == nil {
		return nil, wop.Errorf(wop.CodeUnavailable, "capability %q was stopped and is not served by this host any more; try again", g.capability).
			WithCapability(capability).WithRetryable(true)
	}
	return next.Invoke(ctx, family, method, payload, call)
}

func (g *Gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inFlight--
	if g.closed && g.inFlight == 0 {
		close(g.idle)
	}
}

// Close lets no new call reach the process from now on and waits until
// the calls in flight have finished or ctx ends; it returns ctx's error
// then. Close may be called more than once.
func (g *Gate) Close(ctx context.Context) error {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		if g.inFlight == 0 {
			close(g.idle)
		}
	}
	g.mu.Unlock()
	select {
	case <-g.idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Closed reports whether Close was called.
func (g *Gate) Closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// HandOver sends the calls waiting at a closed gate, and every later one,
// to next; a nil next refuses them as retryable. Only the first HandOver
// counts.
func (g *Gate) HandOver(next registry.Invoker) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.settled {
		return
	}
	g.settled, g.successor = true, next
	close(g.handed)
}

// InFlight returns the number of calls inside the gate.
func (g *Gate) InFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight
}
