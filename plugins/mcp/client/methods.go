package client

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// CallTool sends tools/call and returns the complete CallToolResult as
// the server sent it, answering input requests on the way.
func (c *Client) CallTool(ctx context.Context, name string, arguments json.RawMessage) (json.RawMessage, error) {
	fields := map[string]json.RawMessage{"name": mustJSON(name)}
	if len(arguments) > 0 && string(arguments) != "null" {
		fields["arguments"] = arguments
	}
	cl := &call{method: "tools/call", fields: fields, name: name, hasName: true}
	if c.stdio == nil {
		if e, _ := c.state(); e != eraLegacy {
			cl.headers = paramHeaderValues(c.toolHeaders(ctx, name), arguments)
		}
	}
	return c.sendWithInputs(ctx, cl)
}

// ListTools sends tools/list with the cursor (nil omits it; an empty
// string is sent) and returns that one page as the server sent it.
func (c *Client) ListTools(ctx context.Context, cursor *string) (json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	if cursor != nil {
		fields["cursor"] = mustJSON(*cursor)
	}
	res, err := c.sendComplete(ctx, &call{method: "tools/list", fields: fields})
	if err != nil {
		return nil, err
	}
	c.learnTools(res)
	return res, nil
}

// ReadResource sends resources/read and returns the complete
// ReadResourceResult as the server sent it.
func (c *Client) ReadResource(ctx context.Context, uri string) (json.RawMessage, error) {
	return c.sendWithInputs(ctx, &call{method: "resources/read", fields: map[string]json.RawMessage{"uri": mustJSON(uri)}, name: uri, hasName: true})
}

// learnTools records the x-mcp-header annotations of a tools/list page.
func (c *Client) learnTools(page json.RawMessage) {
	var p struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if json.Unmarshal(page, &p) != nil {
		return
	}
	c.toolsMu.Lock()
	defer c.toolsMu.Unlock()
	for _, t := range p.Tools {
		h, err := ToolHeaders(t.InputSchema)
		if err != nil {
			c.opts.Logger.Warn("tool has invalid x-mcp-header annotations; its calls carry no Mcp-Param headers", "tool", t.Name, "error", err)
		}
		c.tools[t.Name] = toolHeaders{headers: h, invalid: err != nil}
	}
}

// maxHeaderPages bounds the tools/list pages read to learn a tool's
// header annotations.
const maxHeaderPages = 20

// toolHeaders returns the Mcp-Param-* annotations of a tool, listing the
// server's tools first when the tool was not seen yet.
func (c *Client) toolHeaders(ctx context.Context, name string) []ParamHeader {
	c.toolsMu.Lock()
	t, ok := c.tools[name]
	c.toolsMu.Unlock()
	if !ok {
		var cursor *string
		for page := 0; page < maxHeaderPages; page++ {
			res, err := c.ListTools(ctx, cursor)
			if err != nil {
				break
			}
			var p struct {
				NextCursor *string `json:"nextCursor"`
			}
			if json.Unmarshal(res, &p) != nil || p.NextCursor == nil {
				break
			}
			cursor = p.NextCursor
		}
		c.toolsMu.Lock()
		t = c.tools[name]
		c.toolsMu.Unlock()
	}
	if t.invalid {
		return nil
	}
	return t.headers
}

// Health is the outcome of a server/discover probe.
type Health struct {
	Status          string
	CheckedAt       time.Time
	ProtocolVersion string
	// Discover is the DiscoverResult as the server sent it, when there
	// was one.
	Discover json.RawMessage
}

// Health reports the server's state from a server/discover probe no older
// than the probe's ttlMs. A server found to speak only 2025-11-25 is
// probed with a legacy ping in its session instead, never cached, since
// legacy servers send no cache hints.
func (c *Client) Health(ctx context.Context) Health {
	c.healthMu.Lock()
	defer c.healthMu.Unlock()
	now := c.now()
	if c.health != nil && now.Before(c.healthAt.Add(c.healthTTL)) {
		return *c.health
	}
	h := c.probeHealth(ctx)
	c.health, c.healthAt, c.healthTTL = &h, h.CheckedAt, 0
	if h.Discover != nil {
		var d struct {
			TTLMs *json.Number `json:"ttlMs"`
		}
		if json.Unmarshal(h.Discover, &d) == nil && d.TTLMs != nil {
			if ms, err := d.TTLMs.Int64(); err == nil && ms > 0 {
				c.healthTTL = time.Duration(ms) * time.Millisecond
			}
		}
	}
	return h
}

func (c *Client) probeHealth(ctx context.Context) Health {
	h := Health{CheckedAt: c.now().UTC()}
	if c.stdio != nil && c.probeDue() {
		// A legacy era drawn from an unanswered probe is looked at again
		// first, as before a request.
		c.detectMu.Lock()
		c.settleProvisionalLocked(ctx)
		c.detectMu.Unlock()
	}
	if e, _ := c.state(); e == eraLegacy {
		_, err := c.sendLegacy(ctx, &call{method: "ping", fields: map[string]json.RawMessage{}})
		var rpc *RPCError
		switch {
		case err == nil, errors.As(err, &rpc):
			h.Status = StatusReachable
			_, h.ProtocolVersion = c.state()
		case errors.Is(err, ErrIncompatible):
			h.Status = StatusIncompatible
		default:
			h.Status = StatusUnreachable
		}
		return h
	}
	c.detectMu.Lock()
	raw, version, err := c.detectLocked(ctx)
	c.detectMu.Unlock()
	h.Discover = raw
	var rpc *RPCError
	switch {
	case err == nil:
		h.Status = StatusReachable
		h.ProtocolVersion = version
	case errors.Is(err, ErrIncompatible), errors.As(err, &rpc):
		h.Status = StatusIncompatible
	default:
		h.Status = StatusUnreachable
	}
	return h
}
