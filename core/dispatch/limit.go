package dispatch

import (
	"context"
	"fmt"

	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/wop"
)

// limited bounds the calls in flight to one plugin. A call beyond the
// bound waits for a free slot for as long as its context allows, so the
// wait counts against the caller's deadline like the call itself.
type limited struct {
	inv        registry.Invoker
	slots      chan struct{}
	capability string
	// waiting, when set, is called as a call starts to wait for a slot
	// because all are taken; tests use it to see a call queued.
	waiting func()
}

// Limit returns inv bounded to n calls in flight; capability names the
// capability block in errors.
func Limit(inv registry.Invoker, n int, capability string) registry.Invoker {
	return &limited{inv: inv, slots: make(chan struct{}, n), capability: capability}
}

// Invoke implements registry.Invoker.
func (l *limited) Invoke(ctx context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		if l.waiting != nil {
			l.waiting()
		}
		select {
		case l.slots <- struct{}{}:
		case <-ctx.Done():
			code, what := wop.CodeCancelled, "was cancelled"
			if ctx.Err() == context.DeadlineExceeded {
				code, what = wop.CodeDeadlineExceeded, "passed its deadline"
			}
			return nil, wop.Errorf(code, "the call %s while waiting for one of the %d call slots of capability %q (max_concurrent_calls)",
				what, cap(l.slots), l.capability).WithCapability(fmt.Sprintf("host.%s.%s", family, method))
		}
	}
	defer func() { <-l.slots }()
	return l.inv.Invoke(ctx, family, method, payload, call)
}
