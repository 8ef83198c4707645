package direct

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// grantFor is the grant a host signs for the caller of row: its
// declarations, depth, limits and deadline.
func grantFor(row admission.Refusal, runID string) *wophostv1.Grant {
	return &wophostv1.Grant{
		RunId: runID, NodeId: "node_1", TypeId: "demo.node", Pack: "demo",
		DeadlineUnixNano: row.Call.Deadline.UnixNano(), Depth: uint32(row.Call.Depth),
		DepthLimit: uint32(row.Limits.DepthLimit), MaxBytes: row.Limits.MaxBytes,
		Families: GrantedFamilies(row.Declared),
	}
}

// The channel answers every row of the admission's refusal table with
// the code and message Admit gives it, without running the handler: the
// answer the host's router gives the same row (core/dispatch's
// TestRouterAnswersTheRefusalTable).
func TestEndpointAnswersTheRefusalTable(t *testing.T) {
	var ran atomic.Int64
	handle := func(_ context.Context, _, _ string, _ []byte, _ wop.CallContext) ([]byte, error) {
		ran.Add(1)
		return []byte(`{}`), nil
	}
	rules := testRules()
	rules["acme.kv"] = admission.Rules{Facets: []wop.FacetRule{{Method: "put", Facet: "bulk", When: "many"}}}
	f := newFixtureWith(t, handle, &wophostv1.DirectChannelSettings{Rules: RulesToProto(rules)})
	rows := 0
	for _, target := range []struct{ family, method string }{{wop.FamilyAIEnvelope, "generate"}, {"acme.kv", "put"}} {
		for i, row := range admission.Refusals(admission.NodeCaller("demo", "demo.node"), target.family, target.method, []byte(`{"k":"v"}`), rules[target.family], time.Now()) {
			t.Run(target.family+"/"+row.Rule, func(t *testing.T) {
				_, err := f.invoke(f.sign(grantFor(row, target.family+"_"+string(rune('a'+i)))), row.Call.Family, row.Call.Method, string(row.Call.Payload))
				if isRefused(err) {
					t.Fatalf("the grant was refused, want the call refused: %v", err)
				}
				_, want := admission.Admit(row.Call, row.Limits, row.Allows, rules[target.family], time.Now())
				got := wire.FromStatus(err)
				if err == nil || want == nil || got.Code != want.Code || got.Message != want.Message || got.Code != row.Code {
					t.Fatalf("channel: %v; Admit: %v; want the same %s", err, want, row.Code)
				}
			})
			rows++
		}
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the handler ran %d refused calls", n)
	}
	if rows < 14 {
		t.Fatalf("%d rows, want the whole table", rows)
	}
}
