package dispatch

import (
	"context"

	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/wop"
)

// limited bounds the calls in flight to one plugin with the slots a
// plugin's direct channel uses too (admission.Slots).
type limited struct {
	inv   registry.Invoker
	slots *admission.Slots
}

// Limit returns inv bounded to n calls in flight; capability names the
// capability block in errors.
func Limit(inv registry.Invoker, n int, capability string) registry.Invoker {
	return &limited{inv: inv, slots: admission.NewSlots(n, capability)}
}

// Invoke implements registry.Invoker.
func (l *limited) Invoke(ctx context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
	release, refusal := l.slots.Acquire(ctx, family, method)
	if refusal != nil {
		return nil, refusal
	}
	defer release()
	return l.inv.Invoke(ctx, family, method, payload, call)
}
