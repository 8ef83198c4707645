package host

import (
	"encoding/json"
	"fmt"

	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/sdk/hostwire"
)

// checkFacets refuses the facets a plugin's Configure reported for one of
// its core families when they would not make a record OpenWOP admits
// (closed, each facet of the schema's type: hostwire.CheckFacets), naming
// the family and the facet. A vendor family's record, under extensions,
// is open.
func checkFacets(plugin string, families []loader.FamilyDescription, facets map[string]map[string]json.RawMessage) error {
	for _, f := range families {
		if err := hostwire.CheckFacets(f.Name, facets[f.Name]); err != nil {
			return fmt.Errorf("plugin %s describes family %q with an invalid record: %w", plugin, f.Name, err)
		}
	}
	return nil
}
