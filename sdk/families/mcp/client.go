package mcp

import (
	"context"
	"encoding/json"

	"github.com/wophost/wophost/sdk/wop"
)

// Client calls the mcp family. A nil *Client stands for a host that does
// not advertise the family.
type Client struct {
	caller    wop.Caller
	hasClient bool
}

// NewClient returns a Client that calls through c. facets holds the keys of
// the family's advertisement record; a facet is advertised by the presence
// of its key, and the client refuses a call that needs an absent one before
// it leaves. A plugin calling back into the host, which is not shown the
// advertisement, passes nil: every call then goes to the host, which
// checks the facets itself. NewClient returns nil when c is nil.
func NewClient(c wop.Caller, facets map[string]json.RawMessage) *Client {
	if c == nil {
		return nil
	}
	_, client := facets[FacetClient]
	if facets == nil {
		client = true
	}
	return &Client{caller: c, hasClient: client}
}

// HasClient reports whether the client facet is advertised.
func (c *Client) HasClient() bool {
	return c != nil && c.hasClient
}

// CallTool returns the server's CallToolResult unaltered, also when its
// isError is true: a tool failure is a result, not an error.
func (c *Client) CallTool(ctx context.Context, req *CallToolRequest) (json.RawMessage, error) {
	var res json.RawMessage
	if err := c.call(ctx, MethodCallTool, req, req == nil, &res); err != nil {
		return nil, err
	}
	return res, nil
}

// ListTools returns one ListToolsResult page unaltered; follow its
// nextCursor with another call.
func (c *Client) ListTools(ctx context.Context, req *ListToolsRequest) (json.RawMessage, error) {
	var res json.RawMessage
	if err := c.call(ctx, MethodListTools, req, req == nil, &res); err != nil {
		return nil, err
	}
	return res, nil
}

// ReadResource returns the server's ReadResourceResult unaltered.
func (c *Client) ReadResource(ctx context.Context, req *ReadResourceRequest) (json.RawMessage, error) {
	var res json.RawMessage
	if err := c.call(ctx, MethodReadResource, req, req == nil, &res); err != nil {
		return nil, err
	}
	return res, nil
}

// ServerHealth reports whether the server answers server/discover at a
// compatible protocol revision.
func (c *Client) ServerHealth(ctx context.Context, req *ServerHealthRequest) (*ServerHealthResult, error) {
	var res ServerHealthResult
	if err := c.call(ctx, MethodServerHealth, req, req == nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// call holds the checks every method shares. nilReq is passed separately
// because a typed nil pointer inside req (an any) is not == nil.
func (c *Client) call(ctx context.Context, method string, req any, nilReq bool, res any) error {
	if !c.HasClient() {
		return wop.NotProvided(CapabilityClient)
	}
	if nilReq {
		return wop.Errorf(wop.CodeValidation, "%s: nil request", method).WithCapability(CapabilityClient)
	}
	return c.caller.Call(ctx, Family, method, req, res)
}
