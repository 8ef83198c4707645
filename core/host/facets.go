package host

import (
	"encoding/json"
	"fmt"

	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/wop"
)

// checkFacets refuses the facets a plugin's Configure reported for one of
// its core families when they would not make a record OpenWOP admits
// (closed, each facet of the schema's type: the family package's
// CheckFacets), naming the family and the facet. A vendor family's
// record, under extensions, is open.
func checkFacets(plugin string, families []loader.FamilyDescription, facets map[string]map[string]json.RawMessage) error {
	for _, f := range families {
		if err := checkFamilyFacets(f.Name, facets[f.Name]); err != nil {
			return fmt.Errorf("plugin %s describes family %q with an invalid record: %w", plugin, f.Name, err)
		}
	}
	return nil
}

// checkFamilyFacets applies family's check to its facets; nil for a
// vendor family.
func checkFamilyFacets(family string, facets map[string]json.RawMessage) error {
	switch family {
	case wop.FamilyAIEnvelope:
		return aienvelope.CheckFacets(facets)
	case wop.FamilyPromptLibrary:
		return promptlibrary.CheckFacets(facets)
	case wop.FamilyAgentRuntime:
		return agentruntime.CheckFacets(facets)
	case wop.FamilyAgents:
		return agentruntime.CheckAgentsFacets(facets)
	case wop.FamilyMCP:
		return mcp.CheckFacets(facets)
	}
	return nil
}
