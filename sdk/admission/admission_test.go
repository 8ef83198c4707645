package admission

import (
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// aiRules are aiEnvelope's rules as the contract fixes them (this
// package cannot import sdk/families, which builds on it).
var aiRules = Rules{Facets: []wop.FacetRule{{Method: "await", Facet: "await"}, {Method: "generate", Facet: "await", When: "async"}}}

// Every row of the table is refused with its code, and the same call
// with the rule the row breaks kept passes.
func TestRefusalsAreRefused(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		family, method string
		rules          Rules
		rows           int
	}{
		{"aiEnvelope", "generate", aiRules, 4 + 1 + 5},
		{"mcp", "callTool", Rules{Facets: []wop.FacetRule{{Method: wop.EveryMethod, Facet: "client"}}}, 4 + 1},
		{"promptLibrary", "get", Rules{OperatorOnly: []string{"publish", "list"}}, 4 + 2},
		{"acme.kv", "get", Rules{}, 4},
	} {
		rows := Refusals(NodeCaller("p", "p.n"), tc.family, tc.method, []byte(`{"x":1}`), tc.rules, now)
		if len(rows) != tc.rows {
			t.Errorf("%s: %d rows, want %d", tc.family, len(rows), tc.rows)
		}
		for _, r := range rows {
			_, refusal := Admit(r.Call, r.Limits, r.Allows, tc.rules, now)
			if refusal == nil || refusal.Code != r.Code || refusal.Capability != Capability(r.Call.Family, r.Call.Method) {
				t.Errorf("%s %s: %v, want %s", tc.family, r.Rule, refusal, r.Code)
			}
		}
		// The operator declares everything, and a method only it may call
		// is its.
		all := func(string, string) bool { return true }
		ok := Call{Caller: Operator, Family: tc.family, Method: tc.method, Payload: []byte(`{"async":true}`), Depth: RefusalDepthLimit, Deadline: now.Add(time.Second)}
		if _, refusal := Admit(ok, Limits{DepthLimit: RefusalDepthLimit, MaxBytes: int64(len(ok.Payload))}, all, tc.rules, now); refusal != nil {
			t.Errorf("%s: a call at every bound was refused: %v", tc.family, refusal)
		}
		if _, refusal := Admit(ok, Limits{DepthLimit: RefusalDepthLimit}, nil, tc.rules, now); refusal != nil {
			t.Errorf("%s: the operator's call was refused: %v", tc.family, refusal)
		}
	}
}

// The facet a member decides is read from the decoded request: declared,
// every spelling the table refuses as undeclared passes, and those it
// refuses as invalid stay invalid.
func TestDeclaredFacetAdmitsEverySpellingOfTheMember(t *testing.T) {
	now := time.Now()
	for _, r := range Refusals("pack p node p.n", "aiEnvelope", "generate", nil, aiRules, now) {
		if !strings.HasPrefix(r.Rule, "undeclared facet") {
			continue
		}
		r.Declared = append(r.Declared, Declaration{"aiEnvelope", "await"})
		_, refusal := Admit(r.Call, r.Limits, r.Allows, aiRules, now)
		if (refusal == nil) != (r.Code == wop.CodeCapabilityNotDeclared) {
			t.Errorf("%s with await declared: %v", r.Rule, refusal)
		}
		if refusal != nil && (refusal.Code != wop.CodeValidation || !strings.Contains(refusal.Message, "member")) {
			t.Errorf("%s: %v, want a validation_error naming the member", r.Rule, refusal)
		}
	}
}

func TestCheckFacetRules(t *testing.T) {
	methods := []string{"get", "put"}
	for _, tc := range []struct {
		family string
		rules  []wop.FacetRule
		want   string
	}{
		{"acme.kv", []wop.FacetRule{{Method: "put", Facet: "write"}, {Method: "*", Facet: "read"}, {Method: "get", Facet: "bulk", When: "many"}}, ""},
		{"acme.kv", nil, ""},
		{"aiEnvelope", []wop.FacetRule{{Method: "generate", Facet: "await"}}, "the contract fixes"},
		{"acme.kv", []wop.FacetRule{{Method: "Put", Facet: "write"}}, `method "Put" is not one of its methods`},
		{"acme.kv", []wop.FacetRule{{Method: "put", Facet: ""}}, "facet"},
		{"acme.kv", []wop.FacetRule{{Method: "put", Facet: "a.b"}}, "without dots"},
		{"acme.kv", []wop.FacetRule{{Method: "put", Facet: "w", When: " many"}}, "surrounding spaces"},
	} {
		err := CheckFacetRules(tc.family, methods, tc.rules)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s %v: %v, want %q", tc.family, tc.rules, err, tc.want)
		}
	}
}
