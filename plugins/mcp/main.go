// Command wophost-mcp is the wophost capability plugin for the mcp family
// (facet client): it lets node packs call tools, list tools, read
// resources and check the health of MCP servers the operator configures,
// speaking MCP 2026-07-28 and reaching 2025-11-25 servers through the
// specification's backward-compatibility path.
package main

import "github.com/wophost/wophost/sdk/plugin"

func main() { plugin.Serve(newPlugin()) }
