package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wophost/wophost/sdk/plugintest"
)

// The plugin passes the protocol kit and the mcp family checks, run
// against the built binary as a vendor would run them against theirs,
// with a 2026-07-28 Go SDK server and a 2025-11-25-only one.
func TestConformance(t *testing.T) {
	dir := t.TempDir()
	build := func(out, pkg string) string {
		path := filepath.Join(dir, out)
		cmd := exec.Command("go", "build", "-o", path, pkg)
		cmd.Dir = "../.."
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, b)
		}
		return path
	}
	bin := build("wophost-mcp", "./plugins/mcp")
	server := build("gosdk", "./test/mcpservers/gosdk")
	cfg := json.RawMessage(fmt.Sprintf(`{"server":{"modern":{"command":[%q]},"legacy":{"command":[%q,"-legacy"],"discover_timeout":"2s"}}}`, server, server))
	plugintest.Run(t, plugintest.Config{
		Binary: bin,
		Config: cfg,
		Calls:  []plugintest.Call{{Family: "mcp", Method: "callTool", Payload: json.RawMessage(`{"serverId":"modern","name":"add","arguments":{"a":1,"b":2}}`)}},
	})
	for _, id := range []string{"modern", "legacy"} {
		t.Run(id, func(t *testing.T) {
			plugintest.MCP(t, plugintest.MCPConfig{
				Binary: bin, Config: cfg, ServerID: id,
				Tool: "add", ToolArguments: json.RawMessage(`{"a":1,"b":2}`),
				ResourceURI: "file:///greeting", UnknownTool: "no_such_tool",
			})
		})
	}
}
