package dispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// blockingInvoker holds every call until release is closed.
type blockingInvoker struct {
	started chan struct{}
	release chan struct{}
}

func (b *blockingInvoker) Invoke(ctx context.Context, _, _ string, _ []byte, _ wop.CallContext) ([]byte, error) {
	b.started <- struct{}{}
	select {
	case <-b.release:
		return []byte(`1`), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func TestLimitBoundsCallsInFlight(t *testing.T) {
	inv := &blockingInvoker{started: make(chan struct{}, 10), release: make(chan struct{})}
	l := Limit(inv, 2, "slow")

	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.Invoke(context.Background(), "acme.slow", "wait", nil, wop.CallContext{}); err != nil {
				t.Errorf("call in a slot: %v", err)
			}
		}()
	}
	<-inv.started
	<-inv.started

	// Both slots are taken: a third call waits, and its deadline ends the
	// wait without reaching the plugin.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := l.Invoke(ctx, "acme.slow", "wait", nil, wop.CallContext{})
	we := wop.AsError(err)
	if we == nil || we.Code != wop.CodeDeadlineExceeded || we.Capability != "host.acme.slow.wait" {
		t.Fatalf("queued call past its deadline: %v", err)
	}
	select {
	case <-inv.started:
		t.Fatal("the queued call reached the plugin")
	default:
	}

	// A cancelled wait is cancelled.
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if _, err := l.Invoke(cctx, "acme.slow", "wait", nil, wop.CallContext{}); wop.CodeOf(err) != wop.CodeCancelled {
		t.Fatalf("cancelled wait: %v", err)
	}

	// A call made while both slots are taken waits in the limiter, and goes
	// through once a slot frees.
	queued := make(chan struct{}, 1)
	l.(*limited).slots.Waiting = func() { queued <- struct{}{} }
	done := make(chan error, 1)
	go func() {
		_, err := l.Invoke(context.Background(), "acme.slow", "wait", nil, wop.CallContext{})
		done <- err
	}()
	select {
	case <-queued:
	case <-inv.started:
		t.Fatal("a call with both slots taken reached the plugin")
	case err := <-done:
		t.Fatalf("a call with both slots taken did not wait: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("a call with both slots taken never started to wait")
	}
	select {
	case <-inv.started:
		t.Fatal("the waiting call reached the plugin while both slots were taken")
	case err := <-done:
		t.Fatalf("the waiting call ended while both slots were taken: %v", err)
	default:
	}
	close(inv.release)
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatalf("call after a slot freed: %v", err)
	}
	select {
	case <-inv.started:
	default:
		t.Fatal("the call that waited never reached the plugin")
	}
}
