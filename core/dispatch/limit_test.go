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

	// Once a slot frees, a waiting call goes through.
	done := make(chan error, 1)
	go func() {
		_, err := l.Invoke(context.Background(), "acme.slow", "wait", nil, wop.CallContext{})
		done <- err
	}()
	close(inv.release)
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatalf("call after a slot freed: %v", err)
	}
}
