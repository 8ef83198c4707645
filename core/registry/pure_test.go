package registry

import (
	"errors"
	"testing"
)

// IsPure answers the contract's list for a core family, whether served or
// not; a vendor family's declaration while it is advertised and while it
// is withdrawn but not failed; and false for an unknown family.
func TestIsPure(t *testing.T) {
	r := newTestRegistry(t)
	serve(r, "kv", Family{Name: "acme.kv", Methods: []string{"get", "put"}, Pure: []string{"get"}})
	serve(r, "mcp", Family{Name: "mcp", Methods: []string{"callTool", "listTools"}, Pure: []string{"callTool"}})
	for _, tc := range []struct {
		family, method string
		want           bool
	}{
		{"promptLibrary", "get", true},
		{"promptLibrary", "publish", false},
		{"mcp", "listTools", true},
		{"mcp", "readResource", true},
		{"mcp", "serverHealth", true},
		// A core family's own declaration is never taken: the contract
		// fixes its pure methods.
		{"mcp", "callTool", false},
		{"aiEnvelope", "generate", false},
		{"agentRuntime", "spawn", false},
		{"acme.kv", "get", true},
		{"acme.kv", "put", false},
		{"acme.kv", "scan", false},
		{"acme.other", "get", false},
	} {
		if got := r.IsPure(tc.family, tc.method); got != tc.want {
			t.Errorf("IsPure(%q, %q) = %v, want %v", tc.family, tc.method, got, tc.want)
		}
	}
	r.Crash("kv", errors.New("exit 2"))
	if !r.IsPure("acme.kv", "get") {
		t.Error("IsPure(acme.kv, get) = false while the capability is crashed; its declaration still holds")
	}
	r.Fail("kv", StateConfigured, errors.New("refused"))
	if r.IsPure("acme.kv", "get") {
		t.Error("IsPure(acme.kv, get) = true after the capability failed; nothing serves it")
	}
}
