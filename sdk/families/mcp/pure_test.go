package mcp

import "testing"

// The contract's pure methods of mcp are the three reads; callTool is not.
func TestIsPureMethod(t *testing.T) {
	for m, want := range map[string]bool{
		MethodListTools: true, MethodReadResource: true, MethodServerHealth: true,
		MethodCallTool: false, "": false, "listtools": false,
	} {
		if got := IsPureMethod(m); got != want {
			t.Errorf("IsPureMethod(%q) = %v, want %v", m, got, want)
		}
	}
}
