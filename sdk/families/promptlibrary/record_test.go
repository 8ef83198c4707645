package promptlibrary

import (
	"encoding/json"
	"testing"
)

// The promptLibrary record has no facets: {} passes, any key is refused
// naming it.
func TestCheckFacets(t *testing.T) {
	if err := CheckFacets(map[string]json.RawMessage{}); err != nil {
		t.Errorf("{} refused: %v", err)
	}
	if err := CheckFacets(nil); err != nil {
		t.Errorf("no facets refused: %v", err)
	}
	for key, want := range map[string]string{
		"pinned":   `facet "pinned": the promptLibrary record is closed and has no facets`,
		"manage":   `facet "manage": the promptLibrary record is closed and has no facets`,
		"witness":  `facet "witness": the promptLibrary record is closed and has no facets`,
		"revision": `facet "revision": the promptLibrary record is closed and has no facets`,
	} {
		err := CheckFacets(map[string]json.RawMessage{key: json.RawMessage(`{}`)})
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %q", key, err, want)
		}
	}
}
