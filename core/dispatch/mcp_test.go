package dispatch

import (
	"context"
	"testing"

	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/wop"
)

// An agent reaches only what its toolAllowlist names; the plugin that runs
// agents reaches mcp only for one; other callers pass.
func TestMCPPolicy(t *testing.T) {
	m, err := agentruntime.ParseManifest([]byte(`{"id":"math","name":"Math","description":"adds",` +
		`"systemPromptRef":"t/math@1","toolAllowlist":["tools/add"]}`))
	if err != nil {
		t.Fatal(err)
	}
	agent := Caller{Name: "plugin rt agent agt_1 (math)", Agent: &Agent{AgentCaller: AgentCaller{InstanceID: "agt_1", Digest: "sha256:d"}, Manifest: m}}
	tests := []struct {
		name, method, payload string
		caller                Caller
		want                  string // refusal message; "" passes
	}{
		{"listed tool", mcp.MethodCallTool, `{"serverId":"tools","name":"add"}`, agent, ""},
		{"named server", mcp.MethodListTools, `{"serverId":"tools"}`, agent, ""},
		{"tool not listed", mcp.MethodCallTool, `{"serverId":"tools","name":"sub"}`, agent,
			"agent agt_1 (math) may not call tools/sub: it is not in the manifest's toolAllowlist"},
		{"server not named", mcp.MethodReadResource, `{"serverId":"other"}`, agent,
			`agent agt_1 (math) may not reach MCP server "other": no toolAllowlist entry names it`},
		{"runtime without an agent", mcp.MethodCallTool, `{"serverId":"tools","name":"add"}`, Caller{Name: "plugin rt", RunsAgents: true},
			"plugin rt runs agents and may call mcp only on behalf of one (Caller agent:<instance>@<digest>)"},
		{"another plugin", mcp.MethodCallTool, `{"serverId":"x","name":"y"}`, Caller{Name: "plugin p"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			next := func(b []byte) ([]byte, error) { called = true; return b, nil }
			_, err := MCPPolicy{}.Call(context.Background(), tt.caller, wop.CallContext{}, tt.method, []byte(tt.payload), next)
			if tt.want == "" {
				if err != nil || !called {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			we := wop.AsError(err)
			if called || we.Code != wop.CodeCapabilityNotDeclared || we.Message != tt.want || we.Capability != "host.mcp."+tt.method {
				t.Errorf("called %v, error %+v; want capability_not_declared %q", called, we, tt.want)
			}
		})
	}
}
