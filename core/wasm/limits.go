package wasm

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/experimental"
)

// memoryCap backs one instance's linear memory and refuses to grow it past
// the cap. wazero answers a refused grow with memory.grow = -1 and no trap,
// so the refusal is recorded here for Invoke to report after the call.
type memoryCap struct {
	limit uint64

	mu      sync.Mutex
	buf     []byte
	refused uint64 // size in bytes of the first refused grow; 0 = none
}

var _ experimental.MemoryAllocator = (*memoryCap)(nil)

// Allocate implements experimental.MemoryAllocator; an instance has one
// memory, so the allocator is its own LinearMemory.
func (a *memoryCap) Allocate(capBytes, _ uint64) experimental.LinearMemory {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.buf = make([]byte, 0, min(capBytes, a.limit))
	return a
}

// Reallocate implements experimental.LinearMemory.
func (a *memoryCap) Reallocate(size uint64) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	if size > a.limit {
		if a.refused == 0 {
			a.refused = size
		}
		return nil
	}
	if size <= uint64(cap(a.buf)) {
		// Memory never shrinks, so the bytes past len were never exposed
		// and are still zero.
		a.buf = a.buf[:size]
		return a.buf
	}
	// Double to keep repeated small grows cheap, never past the cap.
	grown := make([]byte, size, min(max(size, 2*uint64(cap(a.buf))), a.limit))
	copy(grown, a.buf)
	a.buf = grown
	return a.buf
}

// Free implements experimental.LinearMemory.
func (a *memoryCap) Free() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.buf = nil
}

// refusal answers the size of the first refused grow, if any.
func (a *memoryCap) refusal() (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refused, a.refused != 0
}

// errBudgetSpent is the cause of a budget context ended by the execution cap.
var errBudgetSpent = errors.New("execution budget spent")

// budget measures the module's own execution time and ends its context when
// the time passes the limit. Time inside host imports does not count: a host
// function pauses the budget while it runs (and resumes it around any call
// it makes back into the module).
type budget struct {
	limit  time.Duration
	cancel context.CancelCauseFunc

	mu     sync.Mutex
	used   time.Duration
	since  time.Time // when the module last resumed
	paused int       // nesting depth of host functions
	spent  bool
	timer  *time.Timer
}

// startBudget starts the clock: the returned context ends when the caller's
// does or when the module has run for limit.
func startBudget(ctx context.Context, limit time.Duration) (context.Context, *budget) {
	bctx, cancel := context.WithCancelCause(ctx)
	b := &budget{limit: limit, cancel: cancel, since: time.Now()}
	b.mu.Lock()
	b.timer = time.AfterFunc(limit, b.check)
	b.mu.Unlock()
	return bctx, b
}

// check runs when the timer fires: the budget may have been paused in the
// meantime, so it recounts before ending the context.
func (b *budget) check() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused > 0 || b.spent {
		return
	}
	now := time.Now()
	b.used += now.Sub(b.since)
	b.since = now
	b.expireOrRearm()
}

// expireOrRearm ends the context if the budget is used up, else arms the
// timer for what is left. b.mu is held.
func (b *budget) expireOrRearm() {
	if b.used >= b.limit {
		b.spent = true
		b.cancel(errBudgetSpent)
		return
	}
	b.timer.Reset(b.limit - b.used)
}

// pause stops the clock while the host runs.
func (b *budget) pause() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.paused++
	if b.paused == 1 {
		b.used += time.Since(b.since)
		b.timer.Stop()
	}
}

// resume restarts the clock when the module runs again.
func (b *budget) resume() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.paused--
	if b.paused == 0 && !b.spent {
		b.since = time.Now()
		b.expireOrRearm()
	}
}

// stop ends the measurement and answers whether the budget was spent and
// the module's time so far.
func (b *budget) stop() (spent bool, used time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timer.Stop()
	if b.paused == 0 {
		b.used += time.Since(b.since)
		b.since = time.Now()
	}
	b.paused++ // no resume after stop restarts the clock
	b.cancel(nil)
	return b.spent, b.used
}

// isSpent answers whether the execution cap ended the context.
func (b *budget) isSpent() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent
}
