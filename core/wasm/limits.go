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
	// memories is the module's pool of freed memories, nil for none.
	memories *memoryPool

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
	if buf := a.memories.take(); buf != nil {
		a.buf = buf
		return a
	}
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

// Free implements experimental.LinearMemory. wazero calls it when the
// instance is closed, after its last call has returned, and the host keeps
// no view of the memory past the call that read it: the buffer can serve
// the module's next instance.
func (a *memoryCap) Free() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.memories.give(a.buf)
	a.buf = nil
}

// maxPooledMemory is the largest memory a module's pool keeps for reuse;
// a larger one goes back to the garbage collector.
const maxPooledMemory = 16 << 20

// memoryPool holds one module's freed linear memories. A fresh memory
// costs an allocation the size of the module's minimum (64 KiB for one
// page) that the collector then pays for, run after run; a reused one costs
// clearing the bytes its last instance exposed. The pool empties itself at
// garbage collections (sync.Pool), so an idle module holds none.
type memoryPool struct {
	free sync.Pool // of *[]byte, len = the bytes the last instance exposed
}

// give keeps buf for a later take. Every byte past len(buf) is zero: the
// memory never shrank, so none past its length was exposed since it was
// last cleared or made.
func (p *memoryPool) give(buf []byte) {
	if p == nil || buf == nil || cap(buf) > maxPooledMemory {
		return
	}
	p.free.Put(&buf)
}

// take answers a freed memory, cleared and of length 0, or nil when the
// pool has none. Clearing here, not in give, keeps it off the path of the
// run that freed it; a warm instance takes its memory in the background.
func (p *memoryPool) take() []byte {
	if p == nil {
		return nil
	}
	v, _ := p.free.Get().(*[]byte)
	if v == nil {
		return nil
	}
	buf := *v
	clear(buf)
	return buf[:0]
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
