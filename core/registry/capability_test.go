package registry

import "testing"

func TestSplitCapability(t *testing.T) {
	knowsKV := func(f string) bool { return f == "acme.kv" }
	tests := []struct {
		in            string
		known         func(string) bool
		family, facet string
	}{
		{"agents.manifestRuntime", nil, "agents", "manifestRuntime"},
		{"agents.manifestRuntime", knowsKV, "agents", "manifestRuntime"},
		{"aiEnvelope", nil, "aiEnvelope", ""},
		{"aiEnvelope.await", nil, "aiEnvelope", "await"},
		{"mcp.client", knowsKV, "mcp", "client"},
		{"acme.kv", nil, "acme.kv", ""},
		{"acme.kv", knowsKV, "acme.kv", ""},
		{"acme.kv.watch", knowsKV, "acme.kv", "watch"},
		{"acme.kv.watch", nil, "acme.kv.watch", ""},
		{"other.store.watch", knowsKV, "other.store.watch", ""},
		{"", nil, "", ""},
	}
	for _, tt := range tests {
		family, facet := SplitCapability(tt.in, tt.known)
		if family != tt.family || facet != tt.facet {
			t.Errorf("SplitCapability(%q, known=%v) = %q, %q; want %q, %q",
				tt.in, tt.known != nil, family, facet, tt.family, tt.facet)
		}
	}
}
