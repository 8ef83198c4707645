// Command mcpserver-toolbox is the demo MCP server `make run` calls
// through the wophost mcp plugin: a stdio server built with the official
// Go SDK that offers two small tools and one resource, offline.
package main

import (
	"context"
	"log"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type addInput struct {
	A int64 `json:"a" jsonschema:"first addend"`
	B int64 `json:"b" jsonschema:"second addend"`
}

type addOutput struct {
	Sum int64 `json:"sum" jsonschema:"a + b"`
}

type countInput struct {
	Text string `json:"text" jsonschema:"the text to count"`
}

type countOutput struct {
	Words int `json:"words"`
	Lines int `json:"lines"`
	Runes int `json:"runes"`
}

func main() {
	server := mcp.NewServer(&mcp.Implementation{Name: "wophost-toolbox", Version: "0.1.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{
		Name:        "add",
		Description: "Adds two integers.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, func(_ context.Context, _ *mcp.CallToolRequest, in addInput) (*mcp.CallToolResult, addOutput, error) {
		return nil, addOutput{Sum: in.A + in.B}, nil
	})
	mcp.AddTool(server, &mcp.Tool{
		Name:        "wordcount",
		Description: "Counts the words, lines and characters of a text.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, func(_ context.Context, _ *mcp.CallToolRequest, in countInput) (*mcp.CallToolResult, countOutput, error) {
		out := countOutput{Words: len(strings.FieldsFunc(in.Text, unicode.IsSpace)), Runes: len([]rune(in.Text))}
		if in.Text != "" {
			out.Lines = strings.Count(strings.TrimSuffix(in.Text, "\n"), "\n") + 1
		}
		return nil, out, nil
	})
	server.AddResource(&mcp.Resource{URI: "toolbox://about", Name: "about", MIMEType: "text/plain", Description: "What this server is."},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
				URI: req.Params.URI, MIMEType: "text/plain",
				Text: "wophost-toolbox: a demo MCP server with the tools add and wordcount.",
			}}}, nil
		})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
