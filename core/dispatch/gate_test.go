package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

func TestGateDrainsThenRefuses(t *testing.T) {
	inv := &blockingInvoker{started: make(chan struct{}, 1), release: make(chan struct{})}
	g := NewGate(inv, "kv")
	result := make(chan error, 1)
	go func() {
		_, err := g.Invoke(context.Background(), "acme.kv", "get", nil, wop.CallContext{})
		result <- err
	}()
	<-inv.started
	if n := g.InFlight(); n != 1 {
		t.Fatalf("in flight: %d, want 1", n)
	}

	closed := make(chan error, 1)
	go func() { closed <- g.Close(context.Background()) }()
	// A call arriving after Close began never reaches the process: it
	// waits for the successor.
	waitFor(t, func() bool { return g.Closed() })
	next := &blockingInvoker{started: make(chan struct{}, 1), release: make(chan struct{})}
	forwarded := make(chan error, 1)
	go func() {
		_, err := g.Invoke(context.Background(), "acme.kv", "get", nil, wop.CallContext{})
		forwarded <- err
	}()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with a call in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(inv.release)
	if err := <-result; err != nil {
		t.Fatalf("the call in flight at Close: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := g.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	select {
	case <-inv.started:
		t.Fatal("a call that arrived after Close reached the old process")
	case err := <-forwarded:
		t.Fatalf("the waiting call ended before the hand-over: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.HandOver(next)
	<-next.started
	close(next.release)
	if err := <-forwarded; err != nil {
		t.Fatalf("the call handed over: %v", err)
	}
}

// A closed gate with no successor refuses the waiting calls, retryable.
func TestGateWithoutSuccessorRefuses(t *testing.T) {
	g := NewGate(&blockingInvoker{started: make(chan struct{}, 1), release: make(chan struct{})}, "kv")
	if err := g.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := g.Invoke(ctx, "acme.kv", "get", nil, wop.CallContext{})
	if we := wop.AsError(err); err == nil || we.Code != wop.CodeUnavailable || !we.Retryable || we.Capability != "host.acme.kv.get" {
		t.Fatalf("a call at a closed gate past its deadline: %v", err)
	}
	g.HandOver(nil)
	_, err = g.Invoke(context.Background(), "acme.kv", "get", nil, wop.CallContext{})
	if we := wop.AsError(err); err == nil || we.Code != wop.CodeUnavailable || !we.Retryable {
		t.Fatalf("a call at a gate handed over to nothing: %v", err)
	}
}

func TestGateCloseGivesUpAtItsDeadline(t *testing.T) {
	inv := &blockingInvoker{started: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(inv.release)
	g := NewGate(inv, "kv")
	go func() { _, _ = g.Invoke(context.Background(), "acme.kv", "get", nil, wop.CallContext{}) }()
	<-inv.started
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := g.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a stuck call: %v", err)
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
	}
}
