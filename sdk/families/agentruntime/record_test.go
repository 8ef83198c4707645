package agentruntime

import (
	"encoding/json"
	"testing"
)

// The agentRuntime record has no facets: {} passes, any key is refused
// naming it.
func TestCheckFacets(t *testing.T) {
	if err := CheckFacets(map[string]json.RawMessage{}); err != nil {
		t.Errorf("{} refused: %v", err)
	}
	for key, want := range map[string]string{
		FacetManifestRuntime: `facet "manifestRuntime": the agentRuntime record is closed and has no facets`,
		"spawn":              `facet "spawn": the agentRuntime record is closed and has no facets`,
	} {
		err := CheckFacets(map[string]json.RawMessage{key: json.RawMessage(`true`)})
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %q", key, err, want)
		}
	}
}

// The agents record takes manifestRuntime as an object and nothing else:
// the host's own record passes, each near miss is refused naming the
// facet.
func TestCheckAgentsFacets(t *testing.T) {
	for _, ok := range []string{`{}`, `{"manifestRuntime":{}}`, `{"manifestRuntime":{"handoffValidation":true,"installScope":"host"}}`} {
		var f map[string]json.RawMessage
		if err := json.Unmarshal([]byte(ok), &f); err != nil {
			t.Fatal(err)
		}
		if err := CheckAgentsFacets(f); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, tc := range []struct{ facets, want string }{
		{`{"manifestRuntime":true}`, `facet "manifestRuntime": must be an object, got true`},
		{`{"manifestRuntime":null}`, `facet "manifestRuntime": must be an object, got null`},
		{`{"manifestRuntime":"host"}`, `facet "manifestRuntime": must be an object, got the string "host"`},
		{`{"manifestRuntime":[]}`, `facet "manifestRuntime": must be an object, got an array`},
		{`{"manifestRuntime":{},"handoff":{}}`, `facet "handoff": the agents record is closed; its facets are manifestRuntime`},
	} {
		var f map[string]json.RawMessage
		if err := json.Unmarshal([]byte(tc.facets), &f); err != nil {
			t.Fatal(err)
		}
		err := CheckAgentsFacets(f)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: got %v, want %q", tc.facets, err, tc.want)
		}
	}
}
