package plugin

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
)

// Validate refuses a pure method the family does not serve and any pure
// declaration on a core family, naming the family and the method.
func TestValidatePure(t *testing.T) {
	get := func(context.Context, *Request) (any, error) { return nil, nil }
	for _, tc := range []struct {
		name   string
		family *Family
		want   string // "" when valid
	}{
		{"a served method", &Family{Name: "acme.kv", Status: "stable", Since: "2.0", Witness: "claims-check",
			Methods: map[string]Handler{"get": get, "put": get}, Pure: []string{"get"}}, ""},
		{"none", &Family{Name: "acme.kv", Status: "stable", Since: "2.0", Witness: "claims-check",
			Methods: map[string]Handler{"get": get}}, ""},
		{"not served", &Family{Name: "acme.kv", Status: "stable", Since: "2.0", Witness: "claims-check",
			Methods: map[string]Handler{"get": get}, Pure: []string{"get", "scan"}},
			`family "acme.kv" declares the pure method "scan", which is not one of its Methods`},
		{"a core family", &Family{Name: "mcp", Status: "stable", Since: "2.0", Witness: "seam-gated",
			Methods: map[string]Handler{"listTools": get}, Pure: []string{"listTools"}},
			`family "mcp" declares the pure method "listTools": the contract fixes the pure methods of a core family`},
	} {
		err := (&Plugin{Name: "p", Families: []*Family{tc.family}}).Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Describe sends each family's pure methods, sorted, and none for a
// family without.
func TestDescribeSendsPureMethods(t *testing.T) {
	get := func(context.Context, *Request) (any, error) { return nil, nil }
	p := &Plugin{Name: "p", Version: "1", Families: []*Family{
		{Name: "acme.kv", Status: "stable", Since: "2.0", Witness: "claims-check",
			Methods: map[string]Handler{"get": get, "put": get, "list": get}, Pure: []string{"list", "get"}},
		{Name: "acme.log", Status: "stable", Since: "2.0", Witness: "claims-check",
			Methods: map[string]Handler{"append": get}},
	}}
	s := newServer(p, nil, hclog.NewNullLogger(), wire.DefaultMaxMessageBytes, noop.NewTracerProvider().Tracer(tracerName))
	resp, err := s.Describe(context.Background(), &wophostv1.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetFamilies()[0].GetPureMethods(); !slices.Equal(got, []string{"get", "list"}) {
		t.Errorf("acme.kv pure_methods = %q, want [get list]", got)
	}
	if got := resp.GetFamilies()[1].GetPureMethods(); len(got) != 0 {
		t.Errorf("acme.log pure_methods = %q, want none", got)
	}
}
