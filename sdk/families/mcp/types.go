package mcp

import (
	"encoding/json"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// Family is the family name in the advertisement.
const Family = wop.FamilyMCP

// FacetClient is the facet that every method of Client requires.
const FacetClient = "client"

// CapabilityClient is the capability named by capability_not_provided
// errors: the whole surface stands or falls with the client facet.
const CapabilityClient = "host." + Family + "." + FacetClient

// Method names on the wire.
const (
	MethodCallTool     = "callTool"
	MethodListTools    = "listTools"
	MethodReadResource = "readResource"
	MethodServerHealth = "serverHealth"
)

// IsPureMethod reports whether method is one the contract declares pure:
// it changes nothing anywhere and answers the same request the same way,
// so a replay runs it live instead of answering it from the run's log.
// listTools, readResource and serverHealth are; callTool is not, since a
// tool may act on the world.
func IsPureMethod(method string) bool {
	switch method {
	case MethodListTools, MethodReadResource, MethodServerHealth:
		return true
	}
	return false
}

// The only error codes a call rejects with. CodeMCPError carries the
// server's JSON-RPC error object unaltered in details.error.
const (
	CodeNotFound            = wop.CodeNotFound // unknown serverId
	CodeMCPError            = wop.CodeMCPError
	CodeUpstreamUnavailable = wop.CodeUpstreamUnavailable // transport failure or timeout
)

// Server health statuses.
const (
	// StatusReachable: the server answered the probe and shares a
	// protocol revision, at or above the configured minimum, with the host;
	// ProtocolVersion names it.
	StatusReachable = "reachable"
	// StatusUnreachable: no well-formed answer came back (connection
	// refused, process failed to start or died, timeout, malformed reply).
	StatusUnreachable = "unreachable"
	// StatusIncompatible: the server answered but no revision could be
	// agreed: it shares none at or above the minimum, or it refused the
	// probe and the legacy handshake.
	StatusIncompatible = "incompatible"
)

// CallToolRequest is the body of callTool. Arguments is the tool's input
// object, sent as is and omitted when empty.
type CallToolRequest struct {
	ServerID  string          `json:"serverId"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ListToolsRequest is the body of listTools. Cursor is a pointer because
// an empty-string cursor is a cursor and must be forwarded; nil omits it.
type ListToolsRequest struct {
	ServerID string  `json:"serverId"`
	Cursor   *string `json:"cursor,omitempty"`
}

// ReadResourceRequest is the body of readResource.
type ReadResourceRequest struct {
	ServerID string `json:"serverId"`
	URI      string `json:"uri"`
}

// ServerHealthRequest is the body of serverHealth.
type ServerHealthRequest struct {
	ServerID string `json:"serverId"`
}

// ServerHealthResult reports a server/discover probe no older than its
// ttlMs. Discover is the server's DiscoverResult, unaltered, when one was
// received.
type ServerHealthResult struct {
	ServerID        string          `json:"serverId"`
	Status          string          `json:"status"`
	CheckedAt       time.Time       `json:"checkedAt"`
	ProtocolVersion string          `json:"protocolVersion,omitempty"`
	Discover        json.RawMessage `json:"discover,omitempty"`
}
