package direct

import (
	"encoding/json"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
)

// Account is a pack's own record of one run's calls on its direct
// channels, each with the outcome the node got, handed to the host with
// the node's answer. The plugin keeps the same calls for the host (EndRun),
// but a plugin that is replaced, crashes or hangs before the run ends
// takes its record with it; the pack's account is what the host logs
// then. It is safe for concurrent use; a nil *Account keeps nothing.
type Account struct {
	maxCalls, maxBytes int64

	mu      sync.Mutex
	entries []*accountEntry
	kept    int64
	bytes   int64
	sealed  bool
	dropped int64
	cut     int64
	reason  string
}

// accountEntry is one call, from its start: a call that has not ended
// when the account is sealed is one whose outcome the node never got.
type accountEntry struct {
	call *wophostv1.DirectCall
	done bool
	// gone is a call that did not run on the channel (it went through the
	// host, which logs it) or that the bounds left out.
	gone bool
}

// Why an account leaves calls out.
const (
	cutBounds   = "the pack's account of its direct calls passed the run log's bounds"
	cutInFlight = "a direct call was still in flight when the node returned"
	cutFit      = "the pack's account of its direct calls did not fit in the node's answer"
)

// NewAccount returns an empty account holding at most maxCalls calls and
// maxBytes bytes of requests and outcomes (0: no bound).
func NewAccount(maxCalls, maxBytes int64) *Account {
	return &Account{maxCalls: maxCalls, maxBytes: maxBytes}
}

// begin notes a call about to be sent on a channel. It returns false once
// the account is sealed: the node has returned, and a call it leaves
// behind must not reach a plugin unaccounted (it goes through the host,
// which knows the run has ended).
func (a *Account) begin(family, method string, payload []byte) (*accountEntry, bool) {
	if a == nil {
		return nil, true
	}
	e := &accountEntry{call: &wophostv1.DirectCall{Family: family, Method: method, Payload: payload}}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sealed {
		return nil, false
	}
	// The start is taken under the lock, so the entries are in the order
	// of their starts.
	e.call.StartedUnixNano = time.Now().UnixNano()
	a.entries = append(a.entries, e)
	return e, true
}

// skip forgets e: the call went through the host instead.
func (a *Account) skip(e *accountEntry) {
	if a == nil || e == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	e.gone = true
}

// end records e's outcome, as the node gets it.
func (a *Account) end(e *accountEntry, out []byte, err error) {
	if a == nil || e == nil {
		return
	}
	c := e.call
	c.DurationMicros = time.Since(time.Unix(0, c.StartedUnixNano)).Microseconds()
	if err != nil {
		c.Error, _ = json.Marshal(wire.FromStatus(wire.ToStatus(err))) // a *wop.Error always marshals
	} else {
		c.Result = out
	}
	n := int64(len(c.Payload) + len(c.Result) + len(c.Error) + len(c.Family) + len(c.Method))
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sealed {
		// Sealed while in flight: counted as cut already.
		return
	}
	e.done = true
	if a.dropped > 0 || (a.maxCalls > 0 && a.kept >= a.maxCalls) || (a.maxBytes > 0 && a.bytes+n > a.maxBytes) {
		// Once cut, the account stays cut, as the host's log does.
		e.gone = true
		a.dropLocked(c.StartedUnixNano, cutBounds)
		c.Payload, c.Result, c.Error = nil, nil, nil
		return
	}
	a.kept++
	a.bytes += n
}

func (a *Account) dropLocked(start int64, reason string) {
	if a.dropped == 0 || start < a.cut {
		a.cut, a.reason = start, reason
	}
	a.dropped++
}

// Seal ends the account when the node returns and returns it: the calls
// that ended, in the order they started, the calls still in flight
// counted as dropped. Calls begun after it go through the host.
func (a *Account) Seal() *wophostv1.DirectCallLog {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sealed = true
	out := &wophostv1.DirectCallLog{}
	for _, e := range a.entries {
		switch {
		case e.gone:
		case !e.done:
			a.dropLocked(e.call.StartedUnixNano, cutInFlight)
		default:
			out.Calls = append(out.Calls, e.call)
		}
	}
	out.Dropped, out.CutUnixNano, out.CutReason = a.dropped, a.cut, a.reason
	return out
}

// FitAccount leaves out of log its latest calls until it takes at most
// room bytes encoded, counting them as dropped from the first left out.
// It returns nil when not even the account's counts fit: the host then
// knows nothing of the calls, as from a pack that keeps no account.
func FitAccount(log *wophostv1.DirectCallLog, room int) *wophostv1.DirectCallLog {
	if log == nil {
		return nil
	}
	size := proto.Size(log)
	for len(log.Calls) > 0 && size > room {
		last := log.Calls[len(log.Calls)-1]
		// A repeated field's element costs its size, its tag and its
		// length's varint (at most 5 bytes below 4 GiB).
		size -= proto.Size(last) + 6
		log.Calls = log.Calls[:len(log.Calls)-1]
		if log.Dropped == 0 || last.GetStartedUnixNano() < log.CutUnixNano {
			log.CutUnixNano, log.CutReason = last.GetStartedUnixNano(), cutFit
		}
		log.Dropped++
	}
	if proto.Size(log) > room {
		return nil
	}
	return log
}
