package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/hostwire"
	"github.com/wophost/wophost/sdk/wop"
)

// The router answers every row of the admission's refusal table with
// the code and message Admit gives it, before the plugin sees the call:
// the answer a plugin's direct channel gives the same row
// (sdk/internal/direct's TestEndpointAnswersTheRefusalTable, and the
// kit's refusal rules for any plugin's channel).
func TestRouterAnswersTheRefusalTable(t *testing.T) {
	// A vendor family with a member-decided facet rule, beside the core
	// families the contract gives rules.
	vendor := admission.Rules{Facets: []wop.FacetRule{{Method: "put", Facet: "bulk", When: "many"}}}
	targets := []struct {
		family, method string
		rules          admission.Rules
	}{
		{wop.FamilyAIEnvelope, "generate", hostwire.CoreRules()[wop.FamilyAIEnvelope]},
		{wop.FamilyMCP, "callTool", hostwire.CoreRules()[wop.FamilyMCP]},
		{wop.FamilyPromptLibrary, "get", hostwire.CoreRules()[wop.FamilyPromptLibrary]},
		{"acme.kv", "put", vendor},
	}
	rows := 0
	for _, tc := range targets {
		now := time.Now()
		for _, row := range admission.Refusals(admission.NodeCaller("demo", "demo.node"), tc.family, tc.method, []byte(`{"k":"v"}`), tc.rules, now) {
			t.Run(tc.family+"/"+row.Rule, func(t *testing.T) {
				inv := &fakeInvoker{result: []byte(`{}`)}
				reg := registry.New(registry.Implementation{Name: "wophost", Version: "test"})
				reg.Declare("all", "plugin-all")
				reg.Ready("all", []registry.Family{
					{Name: wop.FamilyAIEnvelope, Methods: []string{"generate", "await"}, Facets: facets("await")},
					{Name: wop.FamilyMCP, Methods: []string{"callTool"}, Facets: facets("client")},
					{Name: wop.FamilyPromptLibrary, Methods: []string{"get", "publish", "list", "versions", "resolve", "verify", "reindex"}},
					{Name: "acme.kv", Methods: []string{"get", "put"}, Rules: vendor, Facets: facets("bulk")},
				}, inv)
				r := NewRouter(reg, row.Limits.DepthLimit, int(row.Limits.MaxBytes))
				call := wop.CallContext{Depth: row.Call.Depth, Deadline: row.Call.Deadline}
				_, err := r.Call(context.Background(), Caller{Name: row.Call.Caller, Allowed: row.Allows}, row.Call.Family, row.Call.Method, row.Call.Payload, call)
				_, want := admission.Admit(row.Call, row.Limits, row.Allows, tc.rules, time.Now())
				got := wop.AsError(err)
				if err == nil || want == nil || got.Code != want.Code || got.Message != want.Message || got.Code != row.Code {
					t.Fatalf("router: %v; Admit: %v; want the same %s", err, want, row.Code)
				}
				if inv.count() != 0 {
					t.Fatalf("the plugin saw %d calls of a refused row", inv.count())
				}
			})
			rows++
		}
	}
	if rows < 20 {
		t.Fatalf("%d rows, want the whole table", rows)
	}
}
