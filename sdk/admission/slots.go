package admission

import (
	"context"

	"github.com/wophost/wophost/sdk/wop"
)

// Slots bound the calls in flight to one plugin (a capability block's
// max_concurrent_calls): the host's routed calls and a plugin's direct
// channel each hold one. A call beyond the bound waits for a free slot
// for as long as its context allows, so the wait counts against the
// caller's deadline like the call itself.
type Slots struct {
	slots      chan struct{}
	capability string
	// Waiting, when set, is called as a call starts to wait because
	// every slot is taken; tests use it to see a call queued.
	Waiting func()
}

// NewSlots returns n slots; capability names the capability block in
// refusals. n < 1 is no bound: Acquire never waits.
func NewSlots(n int, capability string) *Slots {
	s := &Slots{capability: capability}
	if n > 0 {
		s.slots = make(chan struct{}, n)
	}
	return s
}

// Len is the number of slots, 0 for no bound.
func (s *Slots) Len() int { return cap(s.slots) }

// Acquire takes a slot for a call of family.method and returns its
// release, or, when ctx ends first, a deadline_exceeded or cancelled
// refusal naming the bound.
func (s *Slots) Acquire(ctx context.Context, family, method string) (release func(), err *wop.Error) {
	if s.slots == nil {
		return func() {}, nil
	}
	select {
	case s.slots <- struct{}{}:
		return s.release, nil
	default:
	}
	if s.Waiting != nil {
		s.Waiting()
	}
	select {
	case s.slots <- struct{}{}:
		return s.release, nil
	case <-ctx.Done():
		code, what := wop.CodeCancelled, "was cancelled"
		if ctx.Err() == context.DeadlineExceeded {
			code, what = wop.CodeDeadlineExceeded, "passed its deadline"
		}
		return nil, wop.Errorf(code, "the call %s while waiting for one of the %d call slots of capability %q (max_concurrent_calls)",
			what, cap(s.slots), s.capability).WithCapability(Capability(family, method))
	}
}

func (s *Slots) release() { <-s.slots }
