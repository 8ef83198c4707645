//go:build !wasip1

// Left out of wasip1 builds: these are the host's and plugins' checks,
// and a WebAssembly pack's family client depends on sdk/wop alone.

package aienvelope

import (
	"encoding/json"

	"github.com/wophost/wophost/sdk/internal/records"
)

// CheckFacets returns an error naming the facet when facets would not
// make a valid aiEnvelope record in OpenWOP's discovery document: the
// record is closed and its one facet, await, is the boolean true. The
// plugin SDK's Configure and the host refuse such facets.
func CheckFacets(facets map[string]json.RawMessage) error {
	return records.AIEnvelope(facets)
}
