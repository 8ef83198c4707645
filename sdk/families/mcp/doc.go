// Package mcp holds the request and result types of the mcp host-services
// family (docs/contract.md §4.4) and a Client that calls it through a wop.Caller.
// Every method belongs to the client facet and works against a
// host-configured server id.
//
// The MCP server's results reach the caller unaltered, so CallTool,
// ListTools and ReadResource return raw JSON: decoding into a Go struct
// here would drop the fields this package does not know. The zero *Client
// is usable: every method then reports capability_not_provided.
package mcp
