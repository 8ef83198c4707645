package dispatch

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/wop"
)

// Policy wraps the calls to one family with host-side checks: a family's
// host rules live in one Policy (PromptPolicy, AgentPolicy, MCPPolicy),
// installed on the router with SetPolicy, beside the facet rules below
// that every family's calls obey. caller is who makes the call, as the router's own
// checks saw it. next sends a (possibly rewritten) payload on to the
// plugin through the router's usual path and returns its answer.
type Policy interface {
	Call(ctx context.Context, caller Caller, call wop.CallContext, method string, payload []byte, next func([]byte) ([]byte, error)) ([]byte, error)
}

// requiredFacet names the facet a core family's call needs declared and
// advertised, beyond the family itself (docs/contract.md §4): ctx.aiEnvelope.await
// exists only with the await facet, and so does an async generate (a
// pending envelope nobody may await would be lost work); every mcp method
// needs the client facet.
func requiredFacet(family, method string, payload []byte) string {
	switch {
	case family == wop.FamilyAIEnvelope && method == aienvelope.MethodAwait:
		return aienvelope.FacetAwait
	case family == wop.FamilyAIEnvelope && method == aienvelope.MethodGenerate && asksAsync(payload):
		return aienvelope.FacetAwait
	case family == wop.FamilyMCP:
		return mcp.FacetClient
	}
	return ""
}

// asksAsync reports whether a generate request sets "async": true. A
// payload that is not a JSON object is left to the plugin to refuse.
func asksAsync(payload []byte) bool {
	if !bytes.Contains(payload, []byte(`"async"`)) {
		return false
	}
	var req struct {
		Async bool `json:"async"`
	}
	return json.Unmarshal(payload, &req) == nil && req.Async
}

// operatorOnly reports whether family.method is reserved to the operator
// (docs/contract.md §4.2): the promptLibrary methods that manage the store.
// Packs and agents read pinned prompts through get and never change them.
func operatorOnly(family, method string) bool {
	return family == wop.FamilyPromptLibrary && promptlibrary.IsManagementMethod(method)
}
