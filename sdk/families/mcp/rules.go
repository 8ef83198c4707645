//go:build !wasip1

// Left out of wasip1 builds: these are the host's and plugins' checks,
// and a WebAssembly pack's family client depends on sdk/wop alone.

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
