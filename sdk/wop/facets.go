package wop

import (
	"bytes"
	"encoding/json"
)

// The facets a call can need beside its family (RequiredFacet). The
// family packages name them too (aienvelope.FacetAwait, mcp.FacetClient).
const (
	FacetAIEnvelopeAwait = "await"
	FacetMCPClient       = "client"
)

// RequiredFacet is the facet a call of family.method with payload needs
// beside the family itself, "" for none: aiEnvelope's await, and a
// generate that asks for "async": true, need the await facet; every mcp
// call needs the client facet. The host's router checks it on relayed
// calls and the plugin SDK on direct-channel calls, against the facets
// the node declared.
func RequiredFacet(family, method string, payload []byte) string {
	switch {
	case family == FamilyAIEnvelope && method == "await":
		return FacetAIEnvelopeAwait
	case family == FamilyAIEnvelope && method == "generate" && asksAsync(payload):
		return FacetAIEnvelopeAwait
	case family == FamilyMCP:
		return FacetMCPClient
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
