package api

import (
	"context"
	"testing"
	"time"
)

func TestCurrentDrainsTheReplacedBackend(t *testing.T) {
	c := NewCurrent(nil)
	first, release := c.Acquire()
	if first != nil {
		t.Fatalf("got %v, want nil", first)
	}
	release()

	type named struct{ Backend }
	a, b := &named{}, &named{}
	c.Swap(a)
	got, releaseA := c.Acquire()
	if got != a {
		t.Fatalf("Acquire = %v, want a", got)
	}
	old, drained := c.Swap(b)
	if old != a {
		t.Fatalf("Swap returned %v, want a", old)
	}
	if got, rel := c.Acquire(); got != b {
		t.Fatalf("after Swap, Acquire = %v, want b", got)
	} else {
		rel()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := drained(ctx); err == nil {
		t.Fatal("drained while a request still held the old backend")
	}
	releaseA()
	releaseA() // a second release is harmless
	if err := drained(context.Background()); err != nil {
		t.Fatalf("drained after release: %v", err)
	}
}

func TestCurrentSwapWithNoUsers(t *testing.T) {
	c := NewCurrent(nil)
	_, drained := c.Swap(nil)
	if err := drained(context.Background()); err != nil {
		t.Fatal(err)
	}
}
