package direct

import (
	"runtime/debug"
	"sync"

	"github.com/wophost/wophost/sdk/wop"
)

// A caller that stops reading its connection (a pack process stopped or
// stuck) leaves the answers to its calls with the plugin: each waits for
// the connection's writer until the write timeout fails the connection.
// The bytes so held are bounded per connection and per pack: an answer
// that would pass either bound is replaced by a short error, its result
// dropped, and the connection reads no further call from a caller over
// the bound until its answers are written (or the connection fails).

// defaultMaxUnread is the bound when the host sets none: two answers of
// the largest size.
func defaultMaxUnread(maxBytes int) int64 { return 2 * int64(maxBytes) }

// unread counts one connection's answer bytes not written yet.
type unread struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int64
	// closed is set once a write failed: nothing more is written, and a
	// reader waiting for room stops.
	closed bool
	// peak is the most the connection held; freed is set once its memory
	// was handed back.
	peak  int64
	freed bool
}

func newUnread() *unread {
	u := &unread{}
	u.cond = sync.NewCond(&u.mu)
	return u
}

// waitRoom waits while the connection holds bound bytes or more, and
// reports whether the connection is still open.
func (u *unread) waitRoom(bound int64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for u.n >= bound && !u.closed {
		u.cond.Wait()
	}
	return !u.closed
}

// close marks the connection failed and wakes its reader.
func (u *unread) close() {
	u.mu.Lock()
	u.closed = true
	u.mu.Unlock()
	u.cond.Broadcast()
}

// overUnread is the error that replaces an answer of n bytes over the
// bound: the caller (a pack when pack is set) holds held unread bytes.
func overUnread(capability, pack string, n, held, bound int64) *wop.Error {
	who := "the caller's connection"
	if pack != "" {
		who = "pack " + pack
	}
	e := wop.Errorf(wop.CodeUpstreamUnavailable,
		"the answer of %d bytes was dropped: %s has %d bytes of answers it has not read, and the bound is %d (direct_max_unread_bytes)",
		n, who, held, bound)
	if capability != "" {
		e = e.WithCapability(capability)
	}
	return e
}

// hold counts n more unread bytes on u and for pack ("" for the host's
// relayed calls), unless that passes bound on either, in which case it
// returns the error that takes the answer's place, uncounted. A
// connection or pack that holds nothing takes any one answer, which the
// message size limit bounds already.
func (e *Endpoint) hold(u *unread, pack, capability string, n, bound int64) *wop.Error {
	e.umu.Lock()
	defer e.umu.Unlock()
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n > 0 && u.n+n > bound {
		return overUnread(capability, "", n, u.n, bound)
	}
	if p := e.unreadByPack[pack]; pack != "" && p > 0 && p+n > bound {
		return overUnread(capability, pack, n, p, bound)
	}
	e.holdLocked(u, pack, n)
	return nil
}

// holdAnyway counts n unread bytes whatever the bound: an error that
// takes a dropped answer's place, a few hundred bytes.
func (e *Endpoint) holdAnyway(u *unread, pack string, n int64) {
	e.umu.Lock()
	defer e.umu.Unlock()
	u.mu.Lock()
	defer u.mu.Unlock()
	e.holdLocked(u, pack, n)
}

func (e *Endpoint) holdLocked(u *unread, pack string, n int64) {
	u.n += n
	u.peak = max(u.peak, u.n)
	if pack != "" {
		e.unreadByPack[pack] += n
	}
}

// release uncounts n bytes written (or given up on) of u and of pack.
func (e *Endpoint) release(u *unread, pack string, n int64) {
	e.umu.Lock()
	if pack != "" {
		if e.unreadByPack[pack] -= n; e.unreadByPack[pack] <= 0 {
			delete(e.unreadByPack, pack)
		}
	}
	e.umu.Unlock()
	u.mu.Lock()
	u.n -= n
	// A connection that failed holding more than an answer of the
	// largest size hands that memory back to the system now, rather than
	// when the runtime's scavenger gets to it: a plugin that is idle
	// after a caller stopped reading would keep it for minutes.
	free := u.closed && u.n == 0 && u.peak > int64(e.maxBytes) && !u.freed
	if free {
		u.freed = true
	}
	u.mu.Unlock()
	u.cond.Broadcast()
	if free {
		go debug.FreeOSMemory()
	}
}

// Unread returns the answer bytes the endpoint holds unwritten for pack,
// for tests and measurements.
func (e *Endpoint) Unread(pack string) int64 {
	e.umu.Lock()
	defer e.umu.Unlock()
	return e.unreadByPack[pack]
}
