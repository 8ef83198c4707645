package hostwire

import (
	"encoding/json"

	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/internal/records"
)

// CoreRules returns the rules the contract fixes for the core families,
// each from its package under sdk/families.
func CoreRules() map[string]admission.Rules {
	return map[string]admission.Rules{
		aienvelope.Family:    aienvelope.Rules(),
		promptlibrary.Family: promptlibrary.Rules(),
		agentruntime.Family:  agentruntime.Rules(),
		mcp.Family:           mcp.Rules(),
	}
}

// FamilyRules returns the rules of families as the host holds every call
// to them, and sends them to the plugin's direct channel: the contract's
// for a core family, the plugin's own facet rules for a vendor family.
func FamilyRules(families []FamilyDescription) map[string]admission.Rules {
	core := CoreRules()
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

// CheckFacets returns an error naming the facet when facets would not
// make a record of family OpenWOP admits (the family package's
// CheckFacets); nil for a vendor family, whose record is open.
func CheckFacets(family string, facets map[string]json.RawMessage) error {
	return records.Check(family, facets)
}
