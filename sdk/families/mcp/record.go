//go:build !wasip1

// Left out of wasip1 builds: these are the host's and plugins' checks,
// and a WebAssembly pack's family client depends on sdk/wop alone.

package mcp

import (
	"encoding/json"

	"github.com/wophost/wophost/sdk/internal/records"
)

// CheckFacets returns an error naming the facet when facets would not
// make a valid mcp record in OpenWOP's discovery document. The record is
// closed; revisions (a non-empty array of dates YYYY-MM-DD),
// preferredVersion and minimumRevision (dates) and refreshedAt (a string
// starting with a date) are required; client is the constant true; mrtr
// is an object whose maxRounds is an integer from 1 to 16; profiles is an
// array, serverUrls an array of strings, serverMount a string, features
// any value. The plugin SDK's Configure and the host refuse such facets.
func CheckFacets(facets map[string]json.RawMessage) error {
	return records.MCP(facets)
}
