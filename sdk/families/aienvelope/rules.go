//go:build !wasip1

// Left out of wasip1 builds: these are the host's and plugins' checks,
// and a WebAssembly pack's family client depends on sdk/wop alone.

package aienvelope

import (
	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/wop"
)

// Rules are what the contract asks of a call of this family beyond the
// family itself: await, and a generate whose request sets "async": true,
// need the await facet. The host holds every call to them, routed or on
// a direct channel.
func Rules() admission.Rules {
	return admission.Rules{Facets: []wop.FacetRule{
		{Method: MethodAwait, Facet: FacetAwait},
		{Method: MethodGenerate, Facet: FacetAwait, When: "async"},
	}}
}
