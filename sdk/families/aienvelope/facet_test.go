package aienvelope

import "testing"

// Rules names this family's methods and facet by the constants here, and
// reads "async" from the decoded request.
func TestRulesOfThisFamily(t *testing.T) {
	for _, tc := range []struct {
		method, payload, want string
	}{
		{MethodAwait, `{}`, FacetAwait},
		{MethodGenerate, `{"async":true}`, FacetAwait},
		{MethodGenerate, `{"\u0061sync":true}`, FacetAwait},
		{MethodGenerate, `{"async":false}`, ""},
		{MethodGenerate, `{}`, ""},
	} {
		if got, err := Rules().Facet(tc.method, []byte(tc.payload)); err != nil || got != tc.want {
			t.Errorf("Rules().Facet(%s, %s) = %q, %v; want %q", tc.method, tc.payload, got, err, tc.want)
		}
	}
	for _, refused := range []string{`{"Async":true}`, `{"ASYNC":true}`, `{"async":false,"async":true}`} {
		if got, err := Rules().Facet(MethodGenerate, []byte(refused)); err == nil {
			t.Errorf("Rules().Facet(generate, %s) = %q, want a refusal", refused, got)
		}
	}
}
