package aienvelope

import (
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

// wop.RequiredFacet names this family's methods by their wire names; it
// must agree with the constants here.
func TestRequiredFacetOfThisFamily(t *testing.T) {
	for _, tc := range []struct {
		method, payload, want string
	}{
		{MethodAwait, `{}`, FacetAwait},
		{MethodGenerate, `{"async":true}`, FacetAwait},
		{MethodGenerate, `{"async":false}`, ""},
		{MethodGenerate, `{}`, ""},
	} {
		if got := wop.RequiredFacet(Family, tc.method, []byte(tc.payload)); got != tc.want {
			t.Errorf("RequiredFacet(%s, %s) = %q, want %q", tc.method, tc.payload, got, tc.want)
		}
	}
}
