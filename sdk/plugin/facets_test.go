package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// Configure refuses facets that would make an invalid record of a core
// family, naming the family and the facet, and stays unconfigured, as
// the host would refuse to advertise them; valid facets, and any facets
// of a vendor family (whose record is open), pass.
func TestConfigureChecksCoreFamilyFacets(t *testing.T) {
	handler := map[string]Handler{"generate": func(context.Context, *Request) (any, error) { return map[string]bool{"ok": true}, nil }}
	for _, tc := range []struct {
		name   string
		family *Family
		want   string // "" when Configure succeeds
	}{
		{"await true", &Family{Name: "aiEnvelope", Status: "stable", Since: "2.0", Witness: "witnessable-gated", Methods: handler,
			Facets: func() map[string]any { return map[string]any{"await": true} }}, ""},
		{"no facets", &Family{Name: "aiEnvelope", Status: "stable", Since: "2.0", Witness: "witnessable-gated", Methods: handler}, ""},
		{"await {}", &Family{Name: "aiEnvelope", Status: "stable", Since: "2.0", Witness: "witnessable-gated", Methods: handler,
			Facets: func() map[string]any { return map[string]any{"await": nil} }},
			`family "aiEnvelope" would publish an invalid record: facet "await": must be the boolean true (leave the facet out when await is not served), got an object`},
		{"mcp without revisions", &Family{Name: "mcp", Status: "stable", Since: "2.0", Witness: "seam-gated", Methods: handler,
			Facets: func() map[string]any { return map[string]any{"client": true} }},
			`family "mcp" would publish an invalid record: facet "revisions": required in the mcp record`},
		{"a vendor family", &Family{Name: "acme.kv", Status: "stable", Since: "2.0", Witness: "claims-check", Methods: handler,
			Facets: func() map[string]any { return map[string]any{"await": nil, "anything": []int{1}} }}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Plugin{Name: "facets", Version: "1.0.0", Families: []*Family{tc.family}}
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			conn := inProcess(t, p, hclog.NewNullLogger())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := conn.Client.Configure(ctx, &wophostv1.ConfigureRequest{Config: []byte(`{}`)})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Configure: %v", err)
				}
				return
			}
			if we := wire.FromStatus(err); we == nil || !strings.Contains(we.Message, tc.want) {
				t.Fatalf("Configure: %v, want %q", err, tc.want)
			}
			_, err = conn.Client.Invoke(ctx, &wophostv1.InvokeRequest{Family: tc.family.Name, Method: "generate", Payload: []byte(`{}`),
				Call: wire.CallContextToProto(wop.CallContext{RunID: "r", NodeID: "n", Deadline: time.Now().Add(time.Minute)})})
			if we := wire.FromStatus(err); we == nil || we.Code != wop.CodeUnavailable {
				t.Errorf("a call after the refused Configure: %v, want %s", err, wop.CodeUnavailable)
			}
		})
	}
}
