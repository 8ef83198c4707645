// Command wophost-agentrt is the capability plugin that serves the
// agentRuntime family: spawn, delegate, consensus and messageSend over
// agent instances whose state lives in an embedded SQLite database in the
// plugin's state directory. Agents think only through the host: every
// prompt, generation and tool call is a host-service callback to
// promptLibrary, aiEnvelope and mcp.
package main

import "github.com/wophost/wophost/sdk/plugin"

func main() { plugin.Serve(newPlugin()) }
