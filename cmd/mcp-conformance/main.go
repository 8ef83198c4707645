// Command mcp-conformance is the client under test for the official MCP
// conformance suite (@modelcontextprotocol/conformance). The suite starts
// a mock server per scenario and runs this binary with the server's URL as
// the last argument and the scenario name in MCP_CONFORMANCE_SCENARIO.
//
// The binary does not speak MCP itself: it writes a host.hcl that wires
// the wophost-mcp plugin to that URL, starts the wophost host in process,
// and makes the same mcp calls a node pack would. What the suite checks is
// therefore what packs get.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/plugins/mcp/client"
	"github.com/wophost/wophost/sdk/families/mcp"
)

// serverID is the id the generated config gives the scenario's server.
const serverID = "conformance"

func main() {
	plugin := flag.String("plugin", "", "path of the wophost-mcp plugin (default: wophost-mcp next to this binary)")
	timeout := flag.Duration("timeout", 60*time.Second, "bound on the whole scenario")
	verbose := flag.Bool("v", false, "log the host and plugin at debug level on stderr")
	command := flag.String("command", "", "reach a stdio server started with this command line (space-separated) instead of a URL; used with the wophost-* scenarios")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: %s [flags] SERVER_URL\n\nRuns the scenario named by MCP_CONFORMANCE_SCENARIO against SERVER_URL through the wophost host.\n\n", filepath.Base(os.Args[0]))
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() < 1 && *command == "" {
		flag.Usage()
		os.Exit(2)
	}
	var url string
	if flag.NArg() > 0 {
		url = flag.Arg(flag.NArg() - 1)
	}
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *plugin, url, strings.Fields(*command), scenario, *verbose); err != nil {
		fmt.Fprintf(os.Stderr, "mcp-conformance: scenario %q: %v\n", scenario, err)
		os.Exit(1)
	}
}

// pluginPath finds the plugin binary.
func pluginPath(flagValue string) (string, error) {
	if flagValue != "" {
		return filepath.Abs(flagValue)
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locate this binary: %w", err)
	}
	p := filepath.Join(filepath.Dir(self), "wophost-mcp")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no wophost-mcp next to %s (build it with make build, or pass -plugin): %w", self, err)
	}
	return p, nil
}

// hostConfig is the host.hcl for one scenario.
func hostConfig(plugin, stateDir, url string, command []string) string {
	target := "url     = " + strconv.Quote(url)
	if len(command) > 0 {
		quoted := make([]string, len(command))
		for i, c := range command {
			quoted[i] = strconv.Quote(c)
		}
		target = "command = [" + strings.Join(quoted, ", ") + "]"
	}
	return fmt.Sprintf(`host {
  plugin_dir = %[1]s
  state_dir  = %[2]s
  log_level  = "warn"
}

capability "mcp" {
  plugin = %[3]s
  config {
    max_rounds = 8
    server %[4]s {
      %[5]s
      timeout = "20s"
      elicitation {
        policy  = "fixed"
        answers = { confirmed = "true" }
      }
    }
  }
}
`, strconv.Quote(filepath.Dir(plugin)), strconv.Quote(stateDir), strconv.Quote(filepath.Base(plugin)), strconv.Quote(serverID), target)
}

func run(ctx context.Context, pluginFlag, url string, command []string, scenario string, verbose bool) error {
	plugin, err := pluginPath(pluginFlag)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "mcp-conformance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfgPath := filepath.Join(dir, "host.hcl")
	if err := os.WriteFile(cfgPath, []byte(hostConfig(plugin, filepath.Join(dir, "state"), url, command)), 0o600); err != nil {
		return err
	}
	cfg, ldr, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		return errors.New(config.FormatDiagnostics(diags))
	}
	level := hclog.Warn
	if verbose {
		level = hclog.Debug
	}
	h := host.New(cfg, ldr, hclog.New(&hclog.LoggerOptions{Name: "host", Level: level, Output: os.Stderr}), "conformance")
	defer h.Close()
	if d := h.Start(ctx).All(); d.HasErrors() {
		return errors.New(config.FormatDiagnostics(d))
	}
	d := &driver{h: h}
	switch scenario {
	case "tools_call":
		return d.toolsCall(ctx)
	case "request-metadata", "json-schema-ref-no-deref":
		_, err := d.listTools(ctx)
		return err
	case "sep-2322-client-request-state":
		return d.requestState(ctx)
	case "http-standard-headers":
		return d.standardHeaders(ctx)
	case "http-custom-headers":
		return d.customHeaders(ctx)
	case "http-invalid-tool-headers":
		return d.invalidToolHeaders(ctx)
	case "wophost-legacy-everything":
		return d.legacyEverything(ctx)
	case "":
		return errors.New("MCP_CONFORMANCE_SCENARIO is not set")
	}
	return fmt.Errorf("unsupported scenario %q", scenario)
}

// driver makes mcp calls through the host as a pack would.
type driver struct{ h *host.Host }

func (d *driver) call(ctx context.Context, method string, req any) (json.RawMessage, error) {
	payload, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	return d.h.Call(ctx, mcp.Family, method, payload, host.RunOptions{})
}

type tool struct {
	Name        string          `json:"name"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// listTools reads every page.
func (d *driver) listTools(ctx context.Context) ([]tool, error) {
	var all []tool
	var cursor *string
	for page := 0; page < 50; page++ {
		res, err := d.call(ctx, mcp.MethodListTools, mcp.ListToolsRequest{ServerID: serverID, Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("listTools: %w", err)
		}
		var p struct {
			Tools      []tool  `json:"tools"`
			NextCursor *string `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &p); err != nil {
			return nil, fmt.Errorf("listTools result: %w", err)
		}
		all = append(all, p.Tools...)
		if p.NextCursor == nil {
			break
		}
		cursor = p.NextCursor
	}
	return all, nil
}

func (d *driver) callTool(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	return d.call(ctx, mcp.MethodCallTool, mcp.CallToolRequest{ServerID: serverID, Name: name, Arguments: args})
}

func (d *driver) toolsCall(ctx context.Context) error {
	if _, err := d.listTools(ctx); err != nil {
		return err
	}
	_, err := d.callTool(ctx, "add_numbers", json.RawMessage(`{"a":5,"b":3}`))
	return err
}

// requestState calls the multi-round tools; some are expected to fail on
// the server's side, which is the server's business.
func (d *driver) requestState(ctx context.Context) error {
	for _, name := range []string{"test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type"} {
		if _, err := d.callTool(ctx, name, json.RawMessage(`{}`)); err != nil {
			fmt.Fprintf(os.Stderr, "callTool %s: %v\n", name, err)
		}
	}
	return nil
}

// standardHeaders exercises every method the mcp family offers. Packs
// cannot list resources or use prompts, so the resource read uses a URI
// with a percent-encoded space and a query string directly.
func (d *driver) standardHeaders(ctx context.Context) error {
	tools, err := d.listTools(ctx)
	if err != nil {
		return err
	}
	for _, t := range tools {
		if _, err := d.callTool(ctx, t.Name, json.RawMessage(`{}`)); err != nil {
			return fmt.Errorf("callTool %s: %w", t.Name, err)
		}
	}
	for _, uri := range []string{"file:///path/to/file%20name.txt", "https://example.com/resource?id=123"} {
		if _, err := d.call(ctx, mcp.MethodReadResource, mcp.ReadResourceRequest{ServerID: serverID, URI: uri}); err != nil {
			return fmt.Errorf("readResource %s: %w", uri, err)
		}
	}
	return nil
}

// customHeaders makes the tool calls the scenario lists in
// MCP_CONFORMANCE_CONTEXT.
func (d *driver) customHeaders(ctx context.Context) error {
	if _, err := d.listTools(ctx); err != nil {
		return err
	}
	var sc struct {
		ToolCalls []struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"toolCalls"`
	}
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &sc); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	for _, c := range sc.ToolCalls {
		if _, err := d.callTool(ctx, c.Name, c.Arguments); err != nil {
			return fmt.Errorf("callTool %s: %w", c.Name, err)
		}
	}
	return nil
}

// invalidToolHeaders calls only the tools whose x-mcp-header annotations
// are valid: listTools returns every tool unaltered, so excluding the
// invalid ones is the caller's job, done here with the plugin's own
// validation.
func (d *driver) invalidToolHeaders(ctx context.Context) error {
	tools, err := d.listTools(ctx)
	if err != nil {
		return err
	}
	var skipped []string
	for _, t := range tools {
		if _, err := client.ToolHeaders(t.InputSchema); err != nil {
			skipped = append(skipped, t.Name)
			continue
		}
		args := json.RawMessage(`{"region":"us-west1"}`)
		if _, err := d.callTool(ctx, t.Name, args); err != nil {
			return fmt.Errorf("callTool %s: %w", t.Name, err)
		}
	}
	fmt.Fprintf(os.Stderr, "skipped tools with invalid x-mcp-header annotations: %s\n", strings.Join(skipped, ", "))
	return nil
}

// legacyEverything is our own check against
// @modelcontextprotocol/server-everything, a 2025-11-25-only server: the
// calls must succeed through the backward-compatibility path, and the
// results must be the server's.
func (d *driver) legacyEverything(ctx context.Context) error {
	tools, err := d.listTools(ctx)
	if err != nil {
		return err
	}
	found := false
	for _, t := range tools {
		found = found || t.Name == "echo"
	}
	if !found {
		return fmt.Errorf("listTools: no echo tool among %d tools", len(tools))
	}
	res, err := d.callTool(ctx, "echo", json.RawMessage(`{"message":"héllo wophost"}`))
	if err != nil {
		return err
	}
	if !strings.Contains(string(res), "héllo wophost") {
		return fmt.Errorf("callTool echo: unexpected result %s", res)
	}
	health, err := d.call(ctx, mcp.MethodServerHealth, mcp.ServerHealthRequest{ServerID: serverID})
	if err != nil {
		return err
	}
	var h mcp.ServerHealthResult
	if err := json.Unmarshal(health, &h); err != nil {
		return err
	}
	if h.Status != mcp.StatusReachable || h.ProtocolVersion != client.RevisionLegacy {
		return fmt.Errorf("serverHealth = %s, want reachable at %s", health, client.RevisionLegacy)
	}
	fmt.Printf("legacy server-everything: %d tools, echo ok, health %s at %s\n", len(tools), h.Status, h.ProtocolVersion)
	return nil
}
