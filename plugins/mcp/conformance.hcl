# The conformance file of wophost-mcp (docs/conformance.md), with the
# toolbox example server `make build` puts beside it in bin/:
#
#   host conformance --config plugins/mcp/conformance.hcl bin/wophost-mcp

config {
  server "toolbox" {
    command = ["./mcpserver-toolbox"]  # relative to the plugin's directory, where it runs
  }
}

call "mcp.callTool" {
  input = { serverId = "toolbox", name = "add", arguments = { a = 1, b = 2 } }
}

# The mcp contract checks (docs/contract.md §4.4), one block per server.
family "mcp" {
  server_id      = "toolbox"
  tool           = "add"
  tool_arguments = { a = 1, b = 2 }
  resource_uri   = "toolbox://about"
  unknown_tool   = "no_such_tool"
}
