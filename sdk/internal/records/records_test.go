package records

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

// Check applies each core family's own check and leaves a vendor
// family's open record alone.
func TestCheckByFamily(t *testing.T) {
	unknown := map[string]json.RawMessage{"plugintest": json.RawMessage(`{}`)}
	for _, family := range wop.CoreFamilies() {
		if err := Check(family, unknown); err == nil || !strings.HasPrefix(err.Error(), `facet "`) {
			t.Errorf("%s: an unknown facet: %v", family, err)
		}
	}
	if err := Check("acme.kv", unknown); err != nil {
		t.Errorf("a vendor family: %v", err)
	}
	if err := Check(wop.FamilyMCP, unknown); err == nil || !strings.Contains(err.Error(), `facet "revisions": required`) {
		t.Errorf("mcp checks its required facets first: %v", err)
	}
}

// A facet whose value is not one JSON value is refused naming it.
func TestCheckRefusesAMalformedValue(t *testing.T) {
	for _, raw := range []string{``, `tru`, `true true`} {
		err := AIEnvelope(map[string]json.RawMessage{"await": json.RawMessage(raw)})
		if err == nil || !strings.HasPrefix(err.Error(), `facet "await": not JSON`) {
			t.Errorf("%q: %v", raw, err)
		}
	}
}
