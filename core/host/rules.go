package host

import (
	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/sdk/admission"
)

// familyRules returns the rules the host holds every call to families
// to, which a plugin's direct channel applies as well: the contract's
// for a core family, the plugin's own facet rules for a vendor family.
func familyRules(families []loader.FamilyDescription) map[string]admission.Rules {
	core := dispatch.CoreRules()
	out := make(map[string]admission.Rules, len(families))
	for _, f := range families {
		if rules, ok := core[f.Name]; ok {
			out[f.Name] = rules
			continue
		}
		out[f.Name] = admission.Rules{Facets: f.FacetRules}
	}
	return out
}
