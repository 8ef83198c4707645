package registry

import (
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

// The host's own agents.manifestRuntime comes and goes with agentRuntime,
// which itself needs aiEnvelope: the two are advertised together or not
// at all.
func TestProvidedFamilyFollowsItsNeeds(t *testing.T) {
	r := New(Implementation{Name: "wophost", Version: "test"})
	r.Provide(Family{Name: wop.FamilyAgents, Status: "stable", Since: "2.0", Needs: []string{wop.FamilyAgentRuntime},
		Facets: facets("manifestRuntime", `{"installScope":"host","handoffValidation":true}`)})
	if r.Has(wop.FamilyAgents, "") {
		t.Fatalf("agents advertised without agentRuntime: %s", r.Document())
	}
	serve(r, "rt", Family{Name: wop.FamilyAgentRuntime, Methods: []string{"spawn"}, Needs: []string{wop.FamilyAIEnvelope}})
	if r.Has(wop.FamilyAgentRuntime, "") || r.Has(wop.FamilyAgents, "") {
		t.Fatalf("advertised without aiEnvelope: %s", r.Document())
	}
	serve(r, "ai", Family{Name: wop.FamilyAIEnvelope, Methods: []string{"generate"}})
	if !r.Has(wop.FamilyAgentRuntime, "") || !r.Has(wop.FamilyAgents, "manifestRuntime") {
		t.Fatalf("agentRuntime and agents.manifestRuntime not both advertised: %s", r.Document())
	}
	assertDoc(t, r, `{"protocolVersions":["2.0"],"preferredVersion":"2.0","implementation":{"name":"wophost","version":"test"}`+
		`,"aiEnvelope":{"status":"experimental","since":"2.0"}`+
		`,"agentRuntime":{"status":"experimental","since":"2.0"}`+
		`,"agents":{"status":"stable","since":"2.0","manifestRuntime":{"handoffValidation":true,"installScope":"host"}}}`)
	// The host's family is no capability's: no record lists it.
	for _, rec := range r.Records() {
		for _, f := range rec.Advertised {
			if f == wop.FamilyAgents {
				t.Errorf("record %s lists agents", rec.Name)
			}
		}
	}
	// A call to it finds no method and no plugin.
	inv, _, ok := r.Lookup(wop.FamilyAgents)
	if !ok || inv == nil {
		t.Fatal("agents has no invoker")
	}
	if _, err := inv.Invoke(t.Context(), wop.FamilyAgents, "list", nil, wop.CallContext{}); wop.CodeOf(err) != wop.CodeNotFound {
		t.Errorf("invoke: %v", err)
	}
	r.Crash("ai", nil)
	if r.Has(wop.FamilyAgentRuntime, "") || r.Has(wop.FamilyAgents, "") {
		t.Fatalf("still advertised once aiEnvelope crashed: %s", r.Document())
	}
}
