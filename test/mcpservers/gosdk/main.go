// Command gosdk is an MCP server built with the official Go SDK, for
// tests. With -legacy it only speaks 2025-11-25, so a client reaches it
// through the backward-compatibility path; its "ask" tool then asks the
// client for an elicitation, the roots and a sampling completion with
// server-to-client requests, as legacy servers do, and its "elicit_loop"
// tool keeps asking for an elicitation until the client stops answering
// ("loop_count" tells how many were answered); its "client_caps" tool
// reports the capabilities the client declared. It serves stdio, or
// Streamable HTTP with -http (stateful in legacy mode, stateless
// otherwise).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type addArgs struct {
	A int64 `json:"a" jsonschema:"first addend"`
	B int64 `json:"b" jsonschema:"second addend"`
}

type addResult struct {
	Sum int64 `json:"sum"`
}

func main() {
	legacy := flag.Bool("legacy", false, "speak only MCP 2025-11-25")
	httpAddr := flag.String("http", "", "serve Streamable HTTP on this address (127.0.0.1:0 picks a port, printed on stdout) instead of stdio")
	flag.Parse()

	opts := &mcp.ServerOptions{}
	if *legacy {
		opts.SupportedProtocolVersions = []string{"2025-11-25"}
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "wophost-test-gosdk", Version: "1.0.0"}, opts)
	mcp.AddTool(server, &mcp.Tool{Name: "add", Description: "Adds two integers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addArgs) (*mcp.CallToolResult, addResult, error) {
			return nil, addResult{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "fail", Description: "Always reports a tool failure."},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it failed"}}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Legacy: asks the client for a name, its roots and a completion."}, ask)
	mcp.AddTool(server, &mcp.Tool{Name: "client_caps", Description: "Legacy: the capabilities the client declared in its initialize."},
		func(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, clientCaps, error) {
			var caps clientCaps
			if p := req.Session.InitializeParams(); p != nil {
				caps.Capabilities = p.Capabilities
			}
			return nil, caps, nil
		})
	loops := &elicitLoops{}
	mcp.AddTool(server, &mcp.Tool{Name: "elicit_loop", Description: "Legacy: asks for an elicitation again and again, up to 1000 times."}, loops.run)
	mcp.AddTool(server, &mcp.Tool{Name: "loop_count", Description: "How many elicitations the last elicit_loop had answered, and whether it has ended."}, loops.count)
	server.AddResource(&mcp.Resource{URI: "file:///greeting", Name: "greeting", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "hello from gosdk"}}}, nil
		})

	if *httpAddr == "" {
		if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "http://%s/mcp\n", ln.Addr())
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: !*legacy})
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
	log.Fatal(http.Serve(ln, mux))
}

// clientCaps is what the client_caps tool reports.
type clientCaps struct {
	Capabilities *mcp.ClientCapabilities `json:"capabilities"`
}

// ask exercises the server-to-client requests of a legacy session and
// reports what the client answered.
func ask(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	var parts []string
	el, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Your name?", RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"},
	}})
	if err != nil {
		parts = append(parts, "elicit error: "+err.Error())
	} else {
		parts = append(parts, fmt.Sprintf("elicit %s %v", el.Action, el.Content["name"]))
	}
	roots, err := req.Session.ListRoots(ctx, &mcp.ListRootsParams{})
	if err != nil {
		parts = append(parts, "roots error")
	} else {
		for _, r := range roots.Roots {
			parts = append(parts, "root "+r.URI)
		}
	}
	msg, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
		Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Say hi"}}}})
	if err != nil {
		parts = append(parts, "sampling declined")
	} else if tc, ok := msg.Content.(*mcp.TextContent); ok {
		parts = append(parts, "sampling "+tc.Text)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(parts, "; ")}}}, nil, nil
}

// elicitLoops is the state of the elicit_loop tool, read by loop_count.
type elicitLoops struct {
	mu       sync.Mutex
	answered int
	ended    bool
	why      string
}

// maxLoop is where elicit_loop gives up on its own, with a tool error.
const maxLoop = 1000

// run asks for an elicitation until an answer fails (the client refused,
// or cancelled the call) or maxLoop answers came back.
func (l *elicitLoops) run(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	l.mu.Lock()
	l.answered, l.ended, l.why = 0, false, ""
	l.mu.Unlock()
	end := func(why string) {
		l.mu.Lock()
		l.ended, l.why = true, why
		l.mu.Unlock()
	}
	for i := 0; i < maxLoop; i++ {
		if _, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: fmt.Sprintf("Round %d?", i), RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"x": map[string]any{"type": "string"}},
		}}); err != nil {
			end(err.Error())
			return nil, nil, fmt.Errorf("elicitation %d failed: %w", i, err)
		}
		l.mu.Lock()
		l.answered++
		l.mu.Unlock()
	}
	end("gave up")
	return nil, nil, fmt.Errorf("still no answer after %d elicitations", maxLoop)
}

type loopCount struct {
	Answered int    `json:"answered"`
	Ended    bool   `json:"ended"`
	Why      string `json:"why"`
}

func (l *elicitLoops) count(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, loopCount, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return nil, loopCount{Answered: l.answered, Ended: l.ended, Why: l.why}, nil
}
