package mcp

import (
	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/wop"
)

// Rules are what the contract asks of a call of this family beyond the
// family itself: every method needs the client facet.
func Rules() admission.Rules {
	return admission.Rules{Facets: []wop.FacetRule{{Method: wop.EveryMethod, Facet: FacetClient}}}
}
