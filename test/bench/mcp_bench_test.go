package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/test/testbin"
)

// mcpBenchConfig serves mcp from the plugin with the demo toolbox server,
// and the test pack that calls it.
func mcpBenchConfig(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "mcppack")
	if err := testbin.LayOutPack("test/mcpservers/mcppack", binary(tb, "./test/mcpservers/mcppack"), dir); err != nil {
		tb.Fatal(err)
	}
	return writeConfig(tb, fmt.Sprintf(`
capability "mcp" {
  plugin = %q
  config {
    server "toolbox" {
      command = [%q]
    }
  }
}
pack "private.wophost.mcppack" { path = %q }
`, binary(tb, "./plugins/mcp"), binary(tb, "./examples/mcpservers/toolbox"), dir))
}

const addArgs = `{"a":20,"b":22}`

// sdkSession connects the official Go SDK client to its own toolbox
// process over stdio.
func sdkSession(tb testing.TB) *mcp.ClientSession {
	tb.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil)
	s, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(binary(tb, "./examples/mcpservers/toolbox"))}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func sdkCalls(ctx context.Context, s *mcp.ClientSession, n int) error {
	for range n {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 20, "b": 22}})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("add failed: %v", res.Content)
		}
	}
	return nil
}

func hostCallTool(ctx context.Context, h *host.Host, n int) error {
	payload := json.RawMessage(`{"serverId":"toolbox","name":"add","arguments":` + addArgs + `}`)
	for range n {
		res, err := h.Call(ctx, "mcp", "callTool", payload, host.RunOptions{})
		if err != nil {
			return err
		}
		if !strings.Contains(string(res), `"sum":42`) {
			return fmt.Errorf("unexpected result %s", res)
		}
	}
	return nil
}

func packCallTool(ctx context.Context, h *host.Host, n int) error {
	in := json.RawMessage(`{"method":"callTool","request":{"serverId":"toolbox","name":"add","arguments":` + addArgs + `}}`)
	for range n {
		res, err := h.Run(ctx, "mcppack.call", in, host.RunOptions{})
		if err != nil {
			return err
		}
		if !strings.Contains(string(res.Output), `"sum":42`) {
			return fmt.Errorf("unexpected result %s", res.Output)
		}
	}
	return nil
}

// mcpRounds is how many rounds BenchmarkMCPCallTool splits its calls
// into; its ratio is the median of the rounds' ratios.
const mcpRounds = 5

// BenchmarkMCPCallTool compares tools/call made by the Go SDK client
// straight to the demo toolbox server with callTool calls through the host
// and the mcp plugin to another process of the same server: b.N of each,
// in mcpRounds rounds where the two take turns. The ratio is the median of
// the rounds' ratios (ratio-min and ratio-max bound them); the times per
// call are over all rounds.
func BenchmarkMCPCallTool(b *testing.B) {
	ctx := context.Background()
	s := sdkSession(b)
	h := startHost(b, mcpBenchConfig(b))
	direct := newCPUMeter([]string{"caller"}, 0)
	host := newCPUMeter([]string{"host", "plugin"}, 0, processID(b, h, "mcp"))
	if err := sdkCalls(ctx, s, warmCalls); err != nil {
		b.Fatal(err)
	}
	if err := hostCallTool(ctx, h, warmCalls); err != nil {
		b.Fatal(err)
	}
	took, ratios := timeRounds(b, mcpRounds,
		direct.wrapAdding(b, func(n int) error { return sdkCalls(ctx, s, n) }),
		host.wrapAdding(b, func(n int) error { return hostCallTool(ctx, h, n) }))
	b.ReportMetric(float64(took[0].Nanoseconds())/float64(b.N), "sdk-ns/call")
	b.ReportMetric(float64(took[1].Nanoseconds())/float64(b.N), "host-ns/call")
	b.ReportMetric(slices.Min(ratios), "ratio-min")
	b.ReportMetric(slices.Max(ratios), "ratio-max")
	b.ReportMetric(median(ratios), "ratio")
	direct.report(b, "sdk-", b.N)
	host.report(b, "", b.N)
}

// BenchmarkMCPCallToolFromPack compares b.N tools/call of the Go SDK
// client with b.N node runs, back to back, each run calling
// ctx.MCP.CallTool once through the host.
func BenchmarkMCPCallToolFromPack(b *testing.B) {
	ctx := context.Background()
	s := sdkSession(b)
	h := startHost(b, mcpBenchConfig(b))
	// The toolbox servers are children of this process and of the plugin,
	// not measured here.
	direct := newCPUMeter([]string{"caller"}, 0)
	host := newCPUMeter([]string{"host", "plugin"}, 0, processID(b, h, "mcp"))
	timePair(b, "sdk-ns/call",
		direct.wrap(b, func(n int) error { return sdkCalls(ctx, s, n) }),
		host.wrap(b, func(n int) error { return packCallTool(ctx, h, n) }))
	direct.report(b, "sdk-", b.N)
	host.report(b, "", b.N)
}
