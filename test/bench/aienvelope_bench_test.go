package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// aiConfig serves aiEnvelope from the real plugin on its zero-setup local
// provider, with test.echo (the probe pack's required peer) and the probe
// pack.
func aiConfig(tb testing.TB, plugin string) string {
	return writeConfig(tb, fmt.Sprintf(`
capability "echo" {
  plugin   = %q
  families = ["test.echo"]
}
capability "ai" {
  plugin = %q
  config {
    default_provider = "local"
    provider "local" {
      type = "local"
    }
  }
}
pack "private.wophost.probe" {
  path = %q
}
`, bin.testcap, plugin, bin.probePack))
}

// startAIDirect starts the aiEnvelope plugin as the host does, without
// the host, configured like aiConfig.
func startAIDirect(tb testing.TB, pluginPath string) *loader.Capability {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	exe, err := loader.OpenExecutable(pluginPath, loader.Checks{})
	if err != nil {
		tb.Fatal(err)
	}
	c, err := loader.StartCapability("ai", exe, loader.Options{
		Logger: hclog.NewNullLogger(), LogLevel: hclog.Off,
		MaxMessageBytes: config.DefaultMaxMessageBytes, StartTimeout: config.DefaultStartTimeout, HostVersion: "0.0.0-bench",
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Kill)
	if _, err := c.Describe(ctx); err != nil {
		tb.Fatal(err)
	}
	if _, err := c.ConfigSchema(ctx); err != nil {
		tb.Fatal(err)
	}
	res, err := c.Configure(ctx, json.RawMessage(`{"default_provider":"local","provider":{"local":{"type":"local"}}}`), tb.TempDir(), plugin.Storage{}, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if len(res.Diagnostics) > 0 {
		tb.Fatalf("the aiEnvelope plugin refused its config: %+v", res.Diagnostics)
	}
	return c
}

// generatePayload is a generate request with a key of its own, so every
// measured call runs the provider and records an envelope rather than
// replaying one.
func generatePayload(path string, i int) []byte {
	return fmt.Appendf(nil, `{"envelopeType":"bench","systemPrompt":"You are {{tone}}.","userMessage":"Summarise the quick brown fox.",`+
		`"variables":{"tone":"terse"},"idempotencyKey":"bench-%s-%d"}`, path, i)
}

// percentile returns the p-th percentile (0 < p ≤ 100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// BenchmarkAIEnvelopeGenerate times b.N generate calls on the local
// provider three ways, back to back: a raw Invoke on the plugin, a ctx
// call from a pack node (one probe.call run per call, so node dispatch is
// included), and an operator call through the host's router. It reports
// p50 and p99 of each; ns/op is one iteration, that is one call on each of
// the three paths.
func BenchmarkAIEnvelopeGenerate(b *testing.B) {
	plugin := binary(b, "./plugins/aienvelope")
	ctx := context.Background()
	c := startAIDirect(b, plugin)
	h := startHost(b, aiConfig(b, plugin))

	direct := func(i int) error {
		_, err := c.Invoke(ctx, "aiEnvelope", "generate", generatePayload("direct", i), wop.CallContext{})
		return err
	}
	node := func(i int) error {
		in := fmt.Appendf(nil, `{"family":"aiEnvelope","method":"generate","payload":%s}`, generatePayload("node", i))
		_, err := h.Run(ctx, "probe.call", in, host.RunOptions{})
		return err
	}
	operator := func(i int) error {
		_, err := h.Call(ctx, "aiEnvelope", "generate", generatePayload("operator", i), host.RunOptions{})
		return err
	}
	paths := []struct {
		name string
		call func(int) error
	}{{"direct", direct}, {"node", node}, {"operator", operator}}
	for _, p := range paths {
		for i := range warmCalls {
			if err := p.call(-1 - i); err != nil {
				b.Fatalf("%s warm-up: %v", p.name, err)
			}
		}
	}
	b.ResetTimer()
	lat := make([][]time.Duration, len(paths))
	for k, p := range paths {
		lat[k] = make([]time.Duration, b.N)
		for i := range b.N {
			t0 := time.Now()
			err := p.call(i)
			lat[k][i] = time.Since(t0)
			if err != nil {
				b.Fatalf("%s call %d: %v", p.name, i, err)
			}
		}
	}
	b.StopTimer()
	for k, p := range paths {
		slices.Sort(lat[k])
		b.ReportMetric(float64(percentile(lat[k], 50).Nanoseconds()), p.name+"-p50-ns")
		b.ReportMetric(float64(percentile(lat[k], 99).Nanoseconds()), p.name+"-p99-ns")
	}
	b.ReportMetric(float64(percentile(lat[1], 50))/float64(percentile(lat[0], 50)), "node/direct-p50")
}

// TestAIEnvelopeBenchSetup runs the benchmark's setup once, so `go test`
// catches a broken setup without running the benchmark.
func TestAIEnvelopeBenchSetup(t *testing.T) {
	plugin := binary(t, "./plugins/aienvelope")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c := startAIDirect(t, plugin)
	out, err := c.Invoke(ctx, "aiEnvelope", "generate", generatePayload("setup", 0), wop.CallContext{})
	if err != nil {
		t.Fatal(err)
	}
	var direct struct{ Status, Provider string }
	if err := json.Unmarshal(out, &direct); err != nil || direct.Status != "completed" || direct.Provider != "local" {
		t.Fatalf("direct generate: %s %v", out, err)
	}
	h := startHost(t, aiConfig(t, plugin))
	in := fmt.Appendf(nil, `{"family":"aiEnvelope","method":"generate","payload":%s}`, generatePayload("setup", 1))
	res, err := h.Run(ctx, "probe.call", in, host.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var viaHost struct{ Status, Text string }
	if err := json.Unmarshal(res.Output, &viaHost); err != nil || viaHost.Status != "completed" || viaHost.Text == "" {
		t.Fatalf("generate from a node: %s %v", res.Output, err)
	}
}
