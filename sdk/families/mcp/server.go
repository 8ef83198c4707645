//go:build !wasip1

// Left out of wasip1 builds: this needs the plugin SDK (go-plugin, gRPC),
// which a WebAssembly pack built on the family clients never links.

package mcp

import (
	"context"
	"encoding/json"

	"github.com/wophost/wophost/sdk/plugin"
)

// Server is what a plugin implements to serve mcp. Written against it, a
// missing method is the compiler's error rather than the conformance
// kit's. CallTool, ListTools and ReadResource return the server's result
// unaltered, as raw JSON.
type Server interface {
	CallTool(ctx context.Context, req *plugin.Request, in *CallToolRequest) (json.RawMessage, error)
	ListTools(ctx context.Context, req *plugin.Request, in *ListToolsRequest) (json.RawMessage, error)
	ReadResource(ctx context.Context, req *plugin.Request, in *ReadResourceRequest) (json.RawMessage, error)
	ServerHealth(ctx context.Context, req *plugin.Request, in *ServerHealthRequest) (*ServerHealthResult, error)
}

// NewFamily returns the plugin.Family serving s: its name and methods,
// requests decoded strictly. The caller sets the record (Status, Since,
// Until, Witness), Facets (the client facet), Details, Codes, Needs and
// Uses.
func NewFamily(s Server) *plugin.Family {
	return &plugin.Family{Name: Family, Methods: map[string]plugin.Handler{
		MethodCallTool:     plugin.Typed(s.CallTool),
		MethodListTools:    plugin.Typed(s.ListTools),
		MethodReadResource: plugin.Typed(s.ReadResource),
		MethodServerHealth: plugin.Typed(s.ServerHealth),
	}}
}
