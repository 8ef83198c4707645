package plugintest

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// MCPConfig says how to run the mcp family checks.
type MCPConfig struct {
	// Binary, Args, InProcess, Env and StartTimeout are as in Config.
	Binary       string
	Args         []string
	InProcess    *plugin.Plugin
	Env          []string
	StartTimeout time.Duration
	// Config is a configuration that declares ServerID.
	Config json.RawMessage
	// ServerID is a configured server that is reachable during the test.
	ServerID string
	// Tool is a tool ServerID offers, called with ToolArguments (nil sends
	// none). It must complete without asking for input.
	Tool          string
	ToolArguments json.RawMessage
	// ResourceURI, when set, is a resource ServerID serves.
	ResourceURI string
	// UnknownTool, when set, names a tool ServerID does not offer; calling
	// it must reject with mcp_error carrying the server's error object.
	UnknownTool string
}

// MCP starts cfg.Binary, configures it and checks that it serves the mcp
// family as docs/contract.md §4.4 requires, one subtest per rule:
//
//   - Advertised: the family carries the client facet listing ServerID,
//     revisions including 2026-07-28, preferredVersion, minimumRevision,
//     refreshedAt and mrtr.maxRounds between 1 and 16.
//   - UnknownServer: every method rejects an unknown serverId with
//     not_found.
//   - ListTools: one page comes back as a ListToolsResult object; the
//     empty-string cursor is accepted as a cursor (the server, not the
//     provider, decides what it means).
//   - CallTool: the tool's CallToolResult comes back, never an
//     InputRequiredResult.
//   - ReadResource: when ResourceURI is set, a ReadResourceResult.
//   - MCPError: when UnknownTool is set, the rejection is mcp_error with
//     details.error a JSON-RPC error object.
//   - ServerHealth: {serverId, status, checkedAt, protocolVersion?,
//     discover?} with a known status and no other field, so no connection
//     or session state.
func MCP(t *testing.T, cfg MCPConfig) {
	t.Helper()
	mcpRules(testingT{t}, cfg)
}

// mcpRules runs MCP's checks.
func mcpRules(t checkT, cfg MCPConfig) {
	t.Helper()
	c := &mcpChecks{cfg: cfg}
	c.p = start(t, Config{Binary: cfg.Binary, Args: cfg.Args, InProcess: cfg.InProcess, Env: cfg.Env, StartTimeout: cfg.StartTimeout})
	c.configured = c.p.configure(t, cfg.Config)

	t.Run("Advertised", "The mcp family carries the client facet, revisions including 2026-07-28, preferredVersion, minimumRevision, refreshedAt and mrtr.maxRounds 1..16; its details list the server.", c.advertised)
	t.Run("UnknownServer", "Every method refuses an unknown serverId with not_found.", c.unknownServer)
	t.Run("ListTools", "listTools answers a ListToolsResult; the empty-string cursor is passed to the server as a cursor.", c.listTools)
	t.Run("CallTool", "callTool answers the tool's CallToolResult, never an InputRequiredResult.", c.callTool)
	if cfg.ResourceURI != "" {
		t.Run("ReadResource", "readResource answers a ReadResourceResult.", c.readResource)
	}
	if cfg.UnknownTool != "" {
		t.Run("MCPError", "A server's JSON-RPC error is mcp_error with the error object under details.error.", c.mcpError)
	}
	t.Run("ServerHealth", "serverHealth answers serverId, status, checkedAt and at most protocolVersion and discover: no connection or session state.", c.serverHealth)
}

// mcpChecks is one run of the mcp checks against the configured plugin.
type mcpChecks struct {
	cfg        MCPConfig
	p          *Plugin
	configured *ConfigureResult
}

func (c *mcpChecks) call(t checkT, method string, req any) (json.RawMessage, error) {
	t.Helper()
	return c.p.invokeJSON(t, mcp.Family, method, req, wop.CallContext{RunID: "plugintest", NodeID: "plugintest", Deadline: time.Now().Add(rpcTimeout)})
}

func (c *mcpChecks) advertised(t checkT) {
	rec, ok := c.configured.Facets[mcp.Family]
	if !ok {
		t.Fatalf("the plugin does not serve %s", mcp.Family)
	}
	// OpenWOP's client facet is the constant true; the servers are
	// listed in the family's details.
	if string(bytes.TrimSpace(rec[mcp.FacetClient])) != "true" {
		t.Errorf("client facet = %s, want true", rec[mcp.FacetClient])
	}
	var details struct {
		Servers []string `json:"servers"`
	}
	if err := json.Unmarshal(c.configured.Details[mcp.Family], &details); err != nil || !slices.Contains(details.Servers, c.cfg.ServerID) {
		t.Errorf("details %s do not list the server %q", c.configured.Details[mcp.Family], c.cfg.ServerID)
	}
	var revisions []string
	if err := json.Unmarshal(rec["revisions"], &revisions); err != nil || !slices.Contains(revisions, "2026-07-28") {
		t.Errorf("revisions %s does not include 2026-07-28", rec["revisions"])
	}
	for _, k := range []string{"preferredVersion", "minimumRevision", "refreshedAt"} {
		var s string
		if err := json.Unmarshal(rec[k], &s); err != nil || s == "" {
			t.Errorf("%s = %s, want a non-empty string", k, rec[k])
		}
	}
	var pref string
	_ = json.Unmarshal(rec["preferredVersion"], &pref)
	if !slices.Contains(revisions, pref) {
		t.Errorf("preferredVersion %q is not among the revisions %v", pref, revisions)
	}
	var mrtr struct {
		MaxRounds *int `json:"maxRounds"`
	}
	if err := json.Unmarshal(rec["mrtr"], &mrtr); err != nil || mrtr.MaxRounds == nil || *mrtr.MaxRounds < 1 || *mrtr.MaxRounds > 16 {
		t.Errorf("mrtr = %s, want {maxRounds: 1..16}", rec["mrtr"])
	}
}

func (c *mcpChecks) unknownServer(t checkT) {
	const id = "plugintest-no-such-server"
	for method, req := range map[string]any{
		mcp.MethodCallTool:     mcp.CallToolRequest{ServerID: id, Name: "x"},
		mcp.MethodListTools:    mcp.ListToolsRequest{ServerID: id},
		mcp.MethodReadResource: mcp.ReadResourceRequest{ServerID: id, URI: "file:///x"},
		mcp.MethodServerHealth: mcp.ServerHealthRequest{ServerID: id},
	} {
		_, err := c.call(t, method, req)
		expectCode(t, err, wop.CodeNotFound, method+" with an unknown serverId")
	}
}

func (c *mcpChecks) listTools(t checkT) {
	res, err := c.call(t, mcp.MethodListTools, mcp.ListToolsRequest{ServerID: c.cfg.ServerID})
	if err != nil {
		t.Fatalf("listTools: %s", formatError(err))
	}
	var page struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(res, &page); err != nil || page.Tools == nil {
		t.Errorf("listTools result is not a ListToolsResult: %s", res)
	}
	empty := ""
	if _, err := c.call(t, mcp.MethodListTools, mcp.ListToolsRequest{ServerID: c.cfg.ServerID, Cursor: &empty}); err != nil {
		if code := wop.CodeOf(err); code != mcp.CodeMCPError {
			t.Errorf("listTools with an empty-string cursor: %s (an mcp_error from the server is fine, a refusal by the provider is not)", formatError(err))
		}
	}
}

func (c *mcpChecks) callTool(t checkT) {
	res, err := c.call(t, mcp.MethodCallTool, mcp.CallToolRequest{ServerID: c.cfg.ServerID, Name: c.cfg.Tool, Arguments: c.cfg.ToolArguments})
	if err != nil {
		t.Fatalf("callTool %s: %s", c.cfg.Tool, formatError(err))
	}
	var r struct {
		ResultType *string            `json:"resultType"`
		Content    *[]json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.Content == nil {
		t.Errorf("callTool result is not a CallToolResult: %s", res)
	}
	if r.ResultType != nil && *r.ResultType != "complete" {
		t.Errorf("callTool returned resultType %q: input requests must be handled by the provider", *r.ResultType)
	}
}

func (c *mcpChecks) readResource(t checkT) {
	res, err := c.call(t, mcp.MethodReadResource, mcp.ReadResourceRequest{ServerID: c.cfg.ServerID, URI: c.cfg.ResourceURI})
	if err != nil {
		t.Fatalf("readResource: %s", formatError(err))
	}
	var r struct {
		Contents *[]json.RawMessage `json:"contents"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.Contents == nil {
		t.Errorf("readResource result is not a ReadResourceResult: %s", res)
	}
}

func (c *mcpChecks) mcpError(t checkT) {
	_, err := c.call(t, mcp.MethodCallTool, mcp.CallToolRequest{ServerID: c.cfg.ServerID, Name: c.cfg.UnknownTool})
	we := expectCode(t, err, mcp.CodeMCPError, "callTool of an unknown tool")
	if we == nil {
		return
	}
	var d struct {
		Error *struct {
			Code    *int64  `json:"code"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(we.Details, &d); err != nil || d.Error == nil || d.Error.Code == nil || d.Error.Message == nil {
		t.Errorf("mcp_error details %s do not carry the JSON-RPC error object under error", we.Details)
	}
}

func (c *mcpChecks) serverHealth(t checkT) {
	res, err := c.call(t, mcp.MethodServerHealth, mcp.ServerHealthRequest{ServerID: c.cfg.ServerID})
	if err != nil {
		t.Fatalf("serverHealth: %s", formatError(err))
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(res))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil {
		t.Fatalf("serverHealth result is not an object: %s", res)
	}
	for k := range fields {
		if !slices.Contains([]string{"serverId", "status", "checkedAt", "protocolVersion", "discover"}, k) {
			t.Errorf("serverHealth carries %q: only serverId, status, checkedAt, protocolVersion and discover are allowed", k)
		}
	}
	var h mcp.ServerHealthResult
	if err := json.Unmarshal(res, &h); err != nil {
		t.Fatalf("serverHealth result: %v (%s)", err, res)
	}
	if h.ServerID != c.cfg.ServerID || h.CheckedAt.IsZero() ||
		!slices.Contains([]string{mcp.StatusReachable, mcp.StatusUnreachable, mcp.StatusIncompatible}, h.Status) {
		t.Errorf("serverHealth = %s", res)
	}
	if h.Status != mcp.StatusReachable {
		t.Errorf("serverHealth of a reachable server reports %q", h.Status)
	}
}
