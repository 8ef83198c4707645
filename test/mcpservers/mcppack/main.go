// Command mcppack is the node pack the mcp integration tests and the
// benchmark drive: its one node makes an mcp call through ctx.MCP, the
// typed client pack authors use, and returns the result as it came. With
// raw set it sends the request bytes as they are instead, so a test can
// send what the typed client never would; with budgetMs it gives callTool
// a deadline of its own, shorter than the run's, and with padBytes it adds
// an argument "pad" of that many bytes, for a request larger than the run's
// input.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"strings"
	"time"

	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/pack"
	"github.com/wophost/wophost/sdk/wop"
)

//go:embed pack.json
var manifest []byte

type callInput struct {
	Method  string          `json:"method"`
	Request json.RawMessage `json:"request"`
	Raw     bool            `json:"raw"`
	// BudgetMS bounds callTool below the run's own deadline.
	BudgetMS int `json:"budgetMs"`
	// PadBytes adds an argument of that many bytes to callTool.
	PadBytes int `json:"padBytes"`
}

func main() {
	pack.Serve(&pack.Pack{
		Manifest: manifest,
		Nodes: map[string]pack.Node{
			"mcppack.call": pack.TypedNode(func(ctx *pack.Ctx, in *callInput) (any, error) {
				return call(ctx, in)
			}),
		},
	})
}

func call(ctx *pack.Ctx, in *callInput) (any, error) {
	if in.Raw {
		var out json.RawMessage
		err := ctx.Call(mcp.Family, in.Method, in.Request, &out)
		return out, err
	}
	switch in.Method {
	case mcp.MethodCallTool:
		var r mcp.CallToolRequest
		if err := json.Unmarshal(in.Request, &r); err != nil {
			return nil, wop.Errorf(wop.CodeValidation, "request: %v", err)
		}
		if in.PadBytes > 0 {
			args := map[string]json.RawMessage{}
			if len(r.Arguments) > 0 {
				if err := json.Unmarshal(r.Arguments, &args); err != nil {
					return nil, wop.Errorf(wop.CodeValidation, "arguments: %v", err)
				}
			}
			pad, _ := json.Marshal(strings.Repeat("x", in.PadBytes))
			args["pad"] = pad
			b, err := json.Marshal(args)
			if err != nil {
				return nil, wop.Errorf(wop.CodeValidation, "arguments: %v", err)
			}
			r.Arguments = b
		}
		if in.BudgetMS > 0 {
			c, cancel := context.WithTimeout(ctx, time.Duration(in.BudgetMS)*time.Millisecond)
			defer cancel()
			return ctx.MCP.CallTool(c, &r)
		}
		return ctx.MCP.CallTool(ctx, &r)
	case mcp.MethodListTools:
		var r mcp.ListToolsRequest
		if err := json.Unmarshal(in.Request, &r); err != nil {
			return nil, wop.Errorf(wop.CodeValidation, "request: %v", err)
		}
		return ctx.MCP.ListTools(ctx, &r)
	case mcp.MethodReadResource:
		var r mcp.ReadResourceRequest
		if err := json.Unmarshal(in.Request, &r); err != nil {
			return nil, wop.Errorf(wop.CodeValidation, "request: %v", err)
		}
		return ctx.MCP.ReadResource(ctx, &r)
	case mcp.MethodServerHealth:
		var r mcp.ServerHealthRequest
		if err := json.Unmarshal(in.Request, &r); err != nil {
			return nil, wop.Errorf(wop.CodeValidation, "request: %v", err)
		}
		// Returned raw, so the test sees exactly the fields the host sent.
		var out json.RawMessage
		err := ctx.Call(mcp.Family, mcp.MethodServerHealth, &r, &out)
		return out, err
	}
	return nil, wop.Errorf(wop.CodeValidation, "unknown method %q", in.Method)
}
