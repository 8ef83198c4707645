package dispatch

import (
	"context"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

// An undeclared call is capability_not_declared whatever the host serves:
// a family that is not advertised, a facet that is not, a method the
// family does not have. Were the declaration checked after the lookup, a
// caller could learn what the host serves without declaring it.
func TestUndeclaredCallIsRefusedBeforeTheLookup(t *testing.T) {
	denyAll := Caller{Name: "pack:nosy", Allowed: func(string, string) bool { return false }}
	tests := []struct {
		name, family, method string
		what                 string // what the message says was not declared
	}{
		{"family not advertised", "acme.nope", "get", "acme.nope"},
		{"core family not advertised", wop.FamilyPromptLibrary, "get", wop.FamilyPromptLibrary},
		{"facet not advertised", wop.FamilyAIEnvelope, "await", wop.FamilyAIEnvelope + ".await"},
		{"method the family does not have", "acme.kv", "watch", "acme.kv"},
		{"advertised", "acme.kv", "get", "acme.kv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := &fakeInvoker{result: []byte(`{}`)}
			r := newTestRouter(inv)
			_, err := r.Call(context.Background(), denyAll, tt.family, tt.method, nil, wop.CallContext{Depth: 1})
			we := wantWopError(t, err, wop.CodeCapabilityNotDeclared, "host."+tt.family+"."+tt.method)
			if want := "pack:nosy did not declare " + tt.what; !strings.Contains(we.Message, want) {
				t.Errorf("message %q does not say %q", we.Message, want)
			}
			if n := inv.count(); n != 0 {
				t.Errorf("invoker called %d times, want 0", n)
			}
		})
	}
}
