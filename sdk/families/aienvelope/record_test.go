package aienvelope

import (
	"encoding/json"
	"strings"
	"testing"
)

// facets parses a record's facets as the host reads them from Configure.
func facets(t *testing.T, s string) map[string]json.RawMessage {
	t.Helper()
	var f map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return f
}

// The aiEnvelope record takes await as the boolean true and nothing else;
// each near miss is refused naming the facet.
func TestCheckFacets(t *testing.T) {
	for _, ok := range []string{`{}`, `{"await":true}`} {
		if err := CheckFacets(facets(t, ok)); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	if err := CheckFacets(nil); err != nil {
		t.Errorf("no facets refused: %v", err)
	}
	for _, tc := range []struct{ facets, want string }{
		{`{"await":{}}`, `facet "await": must be the boolean true (leave the facet out when await is not served), got an object`},
		{`{"await":"true"}`, `facet "await": must be the boolean true (leave the facet out when await is not served), got the string "true"`},
		{`{"await":1}`, `facet "await": must be the boolean true (leave the facet out when await is not served), got the number 1`},
		{`{"await":null}`, `facet "await": must be the boolean true (leave the facet out when await is not served), got null`},
		{`{"await":false}`, `facet "await": must be the boolean true (leave the facet out when await is not served), got false`},
		{`{"await":[true]}`, `facet "await": must be the boolean true (leave the facet out when await is not served), got an array`},
		{`{"await":true,"streaming":true}`, `facet "streaming": the aiEnvelope record is closed; its facets are await`},
		{`{"status":"stable"}`, `facet "status": the aiEnvelope record is closed; its facets are await`},
	} {
		err := CheckFacets(facets(t, tc.facets))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: got %v, want %q", tc.facets, err, tc.want)
		}
	}
}

// The record the repository's aiEnvelope plugin publishes under an async
// config passes (plugins/aienvelope's facets).
func TestCheckFacetsOfTheAwaitFacet(t *testing.T) {
	b, err := json.Marshal(map[string]any{FacetAwait: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckFacets(facets(t, string(b))); err != nil || !strings.Contains(string(b), `"await":true`) {
		t.Fatalf("%s: %v", b, err)
	}
}
