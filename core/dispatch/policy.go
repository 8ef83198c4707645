package dispatch

import (
	"context"

	"github.com/wophost/wophost/sdk/wop"
)

// Policy wraps the calls to one family with host-side checks: a family's
// host rules live in one Policy (PromptPolicy, AgentPolicy, MCPPolicy),
// installed on the router with SetPolicy, beside the admission (sdk/admission) that
// every family's calls pass first. caller is who makes the call, as the router's own
// checks saw it. next sends a (possibly rewritten) payload on to the
// plugin through the router's usual path and returns its answer.
type Policy interface {
	Call(ctx context.Context, caller Caller, call wop.CallContext, method string, payload []byte, next func([]byte) ([]byte, error)) ([]byte, error)
}
