package dispatch

import "github.com/wophost/wophost/sdk/wop"

// requiredFacet names the facet a core family's method needs advertised,
// beyond the family itself (CONTRACT §4): ctx.aiEnvelope.await exists only
// with the await facet, and every mcp method only with the client facet.
func requiredFacet(family, method string) string {
	switch {
	case family == wop.FamilyAIEnvelope && method == "await":
		return "await"
	case family == wop.FamilyMCP:
		return "client"
	}
	return ""
}
