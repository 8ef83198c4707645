package api

import (
	"context"
	"sync"
)

// Current holds the host that serves new requests. Swap replaces it; the
// replaced host keeps serving the requests that acquired it until they
// release it, so a reload never fails a call in flight.
type Current struct {
	mu  sync.Mutex
	gen *generation
}

// generation counts the requests using one backend.
type generation struct {
	backend  Backend
	users    int
	retired  bool
	released chan struct{} // closed when retired and users reaches zero
}

// NewCurrent returns a Current serving b (nil: no host yet).
func NewCurrent(b Backend) *Current {
	return &Current{gen: newGeneration(b)}
}

func newGeneration(b Backend) *generation {
	return &generation{backend: b, released: make(chan struct{})}
}

// Acquire returns the current backend and a release func the caller must
// call when done with it. The backend may be nil.
func (c *Current) Acquire() (Backend, func()) {
	c.mu.Lock()
	g := c.gen
	g.users++
	c.mu.Unlock()
	var once sync.Once
	return g.backend, func() { once.Do(func() { c.release(g) }) }
}

func (c *Current) release(g *generation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g.users--
	if g.retired && g.users == 0 {
		close(g.released)
	}
}

// Swap makes b current and returns the backend it replaced with a wait
// func that blocks until every request holding that backend has released
// it, or ctx ends (its error is returned then).
func (c *Current) Swap(b Backend) (Backend, func(ctx context.Context) error) {
	c.mu.Lock()
	old := c.gen
	c.gen = newGeneration(b)
	old.retired = true
	if old.users == 0 {
		close(old.released)
	}
	c.mu.Unlock()
	return old.backend, func(ctx context.Context) error {
		select {
		case <-old.released:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
