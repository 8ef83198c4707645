package dispatch

import (
	"context"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/wop"
)

// Policy wraps the calls to one family with host-side checks: a family's
// host rules live in one Policy (PromptPolicy, AgentPolicy, MCPPolicy),
// installed on the router with SetPolicy, beside the facet rule (wop.RequiredFacet)
// that every family's calls obey. caller is who makes the call, as the router's own
// checks saw it. next sends a (possibly rewritten) payload on to the
// plugin through the router's usual path and returns its answer.
type Policy interface {
	Call(ctx context.Context, caller Caller, call wop.CallContext, method string, payload []byte, next func([]byte) ([]byte, error)) ([]byte, error)
}

// operatorOnly reports whether family.method is reserved to the operator
// (docs/contract.md §4.2): the promptLibrary methods that manage the store.
// Packs and agents read pinned prompts through get and never change them.
func operatorOnly(family, method string) bool {
	return family == wop.FamilyPromptLibrary && promptlibrary.IsManagementMethod(method)
}
