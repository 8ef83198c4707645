package main

import (
	"encoding/json"
	"time"

	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/wop"
)

// familyMCP is BADPLUGIN_FAMILY's value that makes the plugin serve mcp,
// as if it were connected to one server, mcpServer, offering the tool
// mcpTool and the resource mcpResource. Its rules to break:
//
//   - mcp-advertised: the facet's mrtr.maxRounds is 0.
//   - mcp-unknown-server: serverHealth of an unknown server answers
//     unreachable instead of not_found.
//   - mcp-list-tools: an empty-string cursor is refused by the provider.
//   - mcp-call-tool: callTool answers an input request.
//   - mcp-read-resource: readResource answers no contents.
//   - mcp-error: a call of an unknown tool is mcp_error without the
//     server's error object.
//   - mcp-health: serverHealth carries session state.
const familyMCP = "mcp"

// The server the mcp mode pretends to be connected to.
const (
	mcpServer   = "srv"
	mcpTool     = "echo"
	mcpResource = "file:///readme"
)

// mcpFacets is the facet record of the mcp family.
func (s *server) mcpFacets() []byte {
	maxRounds := 4
	if s.breaks("mcp-advertised") {
		maxRounds = 0
	}
	b, _ := json.Marshal(map[string]any{
		mcp.FacetClient:    true,
		"revisions":        []string{"2026-07-28"},
		"preferredVersion": "2026-07-28",
		"minimumRevision":  "2026-07-28",
		"refreshedAt":      "2026-01-01T00:00:00Z",
		"mrtr":             map[string]any{"maxRounds": maxRounds},
	})
	return b
}

// mcpDetails lists the server the mcp mode is connected to.
func mcpDetails() []byte { return []byte(`{"servers":["` + mcpServer + `"]}`) }

// mcpInvoke serves the mcp family.
func (s *server) mcpInvoke(method string, payload []byte) ([]byte, error) {
	var req struct {
		ServerID string  `json:"serverId"`
		Name     string  `json:"name"`
		Cursor   *string `json:"cursor"`
		URI      string  `json:"uri"`
	}
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, wop.Errorf(wop.CodeValidation, "%s: %v", method, err)
	}
	known := map[string]bool{mcp.MethodCallTool: true, mcp.MethodListTools: true, mcp.MethodReadResource: true, mcp.MethodServerHealth: true}
	if !known[method] {
		return nil, wop.Errorf(wop.CodeNotFound, "no method %s", method).WithCapability("host." + mcp.Family + "." + method)
	}
	if req.ServerID != mcpServer {
		if method == mcp.MethodServerHealth && s.breaks("mcp-unknown-server") {
			return json.Marshal(mcp.ServerHealthResult{ServerID: req.ServerID, Status: mcp.StatusUnreachable, CheckedAt: time.Now().UTC()})
		}
		return nil, wop.Errorf(wop.CodeNotFound, "no server %s", req.ServerID)
	}
	switch method {
	case mcp.MethodListTools:
		if req.Cursor != nil && *req.Cursor == "" && s.breaks("mcp-list-tools") {
			return nil, wop.Errorf(wop.CodeValidation, "the cursor is empty")
		}
		return []byte(`{"tools":[{"name":"` + mcpTool + `","inputSchema":{"type":"object"}}]}`), nil
	case mcp.MethodCallTool:
		if req.Name != mcpTool {
			e := wop.Errorf(mcp.CodeMCPError, "unknown tool %s", req.Name)
			if !s.breaks("mcp-error") {
				e = e.WithDetails(map[string]any{"error": map[string]any{"code": -32602, "message": "unknown tool"}})
			}
			return nil, e
		}
		if s.breaks("mcp-call-tool") {
			return []byte(`{"resultType":"input_required","content":[],"inputRequests":{}}`), nil
		}
		return []byte(`{"content":[{"type":"text","text":"echo"}]}`), nil
	case mcp.MethodReadResource:
		if s.breaks("mcp-read-resource") {
			return []byte(`{"content":[]}`), nil
		}
		return []byte(`{"contents":[{"uri":"` + mcpResource + `","text":"read me"}]}`), nil
	}
	h := map[string]any{"serverId": mcpServer, "status": mcp.StatusReachable, "checkedAt": time.Now().UTC(), "protocolVersion": "2026-07-28"}
	if s.breaks("mcp-health") {
		h["sessionId"] = "s-1"
	}
	return json.Marshal(h)
}
