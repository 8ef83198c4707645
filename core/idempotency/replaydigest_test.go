package idempotency

import "testing"

// A replay's digest depends on its source run and the set of its live
// calls, never on their order or repeats, and is never an execution's.
func TestReplayDigest(t *testing.T) {
	a := ReplayDigest("run_01", []string{"mcp.callTool", "aiEnvelope"})
	if b := ReplayDigest("run_01", []string{"aiEnvelope", "mcp.callTool", "aiEnvelope"}); a != b {
		t.Errorf("order or repeats changed the digest: %s, %s", a, b)
	}
	for name, other := range map[string]string{
		"another run":      ReplayDigest("run_02", []string{"mcp.callTool", "aiEnvelope"}),
		"fewer live calls": ReplayDigest("run_01", []string{"aiEnvelope"}),
		"no live calls":    ReplayDigest("run_01", nil),
		"joined names":     ReplayDigest("run_01", []string{"aiEnvelope\x00mcp.callTool"}),
		"an execution":     RequestDigest("run_01", []byte(`{}`)),
		"a run id prefix":  ReplayDigest("run_0", []string{"1", "aiEnvelope", "mcp.callTool"}),
	} {
		if other == a {
			t.Errorf("%s has the same digest", name)
		}
	}
}
