// Package bench measures what the host costs: a ctx call routed through the
// host against a raw Invoke on the same plugin, and the time from config
// to a ready host. Everything runs the real binaries; nothing is mocked.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
	"github.com/wophost/wophost/test/testbin"
)

// payload is the ~200-byte JSON object every measured call carries, so
// both paths pay the same encoding cost.
const payload = `{"id":"bench-0001","kind":"echo","n":42,"ok":true,"tags":["alpha","beta","gamma"],` +
	`"text":"the quick brown fox jumps over the lazy dog, then does it again for good measure",` +
	`"ts":"2026-01-01T00:00:00Z"}`

// maxStarts caps BenchmarkStartToReady: `make bench` passes -benchtime
// 2000x to every benchmark, and 2000 host starts would take minutes
// without making the per-start figure any better.
const maxStarts = 10

// warmCalls are made on each path before timing, so the first call's
// connection and buffer set-up is not counted.
const warmCalls = 20

// startTimeout bounds one host or plugin start, so a wedged process fails
// the benchmark instead of hanging it.
const startTimeout = time.Minute

// bins holds the binaries and pack directories TestMain builds once.
type bins struct {
	dir     string
	testcap string
	kv      string
	// probePack and kvdemoPack are pack directories: pack.json plus the
	// binary at its runtime.entry.
	probePack  string
	kvdemoPack string
	// kvdemo is the kvdemo pack's executable, outside its directory.
	kvdemo string
	// cache builds, on first use, what a benchmark needs beyond the above.
	cache *testbin.Cache
}

var bin *bins

func TestMain(m *testing.M) {
	// go-plugin logs broker shutdown through the standard logger when a
	// host closes; unsilenced, it splits benchmark result lines.
	log.SetOutput(io.Discard)
	os.Exit(testbin.Main(m, "wophost-bench-", func(dir string) (err error) {
		bin, err = buildBinaries(dir)
		return err
	}))
}

func buildBinaries(dir string) (*bins, error) {
	b := &bins{
		dir:        dir,
		testcap:    filepath.Join(dir, "testcap"),
		kv:         filepath.Join(dir, "wophost-kv"),
		probePack:  filepath.Join(dir, "packs", "probe"),
		kvdemoPack: filepath.Join(dir, "packs", "kvdemo"),
		kvdemo:     filepath.Join(dir, "kvdemo"),
		cache:      testbin.NewCache(dir),
	}
	probe, kvdemo := filepath.Join(dir, "probe"), b.kvdemo
	if err := testbin.Build(map[string]string{
		b.testcap: "./test/plugins/testcap",
		b.kv:      "./examples/plugins/kv",
		probe:     "./test/packs/probe",
		kvdemo:    "./examples/packs/kvdemo",
	}); err != nil {
		return nil, err
	}
	if err := testbin.LayOutPack("test/packs/probe", probe, b.probePack); err != nil {
		return nil, err
	}
	if err := testbin.LayOutPack("examples/packs/kvdemo", kvdemo, b.kvdemoPack); err != nil {
		return nil, err
	}
	return b, nil
}

// binary builds the package pkg (such as "./plugins/mcp") once for the
// whole benchmark binary and returns its path.
func binary(tb testing.TB, pkg string) string {
	tb.Helper()
	return bin.cache.MustBinary(tb, pkg)
}

// writeConfig writes text as host.hcl in a fresh directory, with the
// host's state kept there too.
func writeConfig(tb testing.TB, text string) string {
	tb.Helper()
	return writeConfigIn(tb, "", text)
}

// writeConfigIn is writeConfig with hostBody (such as a storage block)
// added to the host block.
func writeConfigIn(tb testing.TB, hostBody, text string) string {
	tb.Helper()
	dir := tb.TempDir()
	path := filepath.Join(dir, "host.hcl")
	hostBlock := fmt.Sprintf("host {\n  state_dir = %q\n  log_level = \"off\"\n%s}\n", filepath.Join(dir, "state"), hostBody)
	if err := os.WriteFile(path, []byte(hostBlock+text), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// echoConfig serves test.echo from testcap and loads the probe pack, with
// the pack's calls on the host's routed path (direct_calls = false), which
// the host relays on the plugin's channel; the direct channel's figures
// use echoConfigDirect.
func echoConfig(tb testing.TB) string {
	return writeConfig(tb, routedEchoDeployment())
}

// routedEchoDeployment is echoDeployment with the capability's calls on
// the host's routed path (direct_calls = false).
func routedEchoDeployment() string {
	return strings.Replace(echoDeployment(), "families = [\"test.echo\"]\n", "families = [\"test.echo\"]\n  direct_calls = false\n", 1)
}

// echoConfigGRPC is echoConfig with direct channels off (direct_channels
// = false): the host relays the calls on the plugin's gRPC connection.
func echoConfigGRPC(tb testing.TB) string {
	return writeConfigIn(tb, "  direct_channels = false\n", echoDeployment())
}

// echoConfigDirect is echoConfig with direct channels, the default.
func echoConfigDirect(tb testing.TB) string {
	return writeConfig(tb, echoDeployment())
}

// demoConfig writes the demo deployment as a host config.
func demoConfig(tb testing.TB) string {
	tb.Helper()
	path := writeConfig(tb, demoDeployment(tb))
	publishDemoPrompt(tb, path)
	return path
}

// publishDemoPrompt publishes the prompt the kvdemo pack pins into the
// store of the config at path, as the demo does before it starts the
// host: a pack whose pinned prompt the store does not hold is refused at
// load.
func publishDemoPrompt(tb testing.TB, path string) {
	tb.Helper()
	out, err := exec.Command(binary(tb, "./cmd/host"), "--config", path, "prompts", "publish",
		testbin.SourceDir("examples/prompts/kvdemo-describe.prompt")).CombinedOutput()
	if err != nil {
		tb.Fatalf("publish the demo's prompt: %v\n%s", err, out)
	}
}

// demoDeployment is the example deployment of host.hcl.example: the four
// family plugins (aiEnvelope on the local provider, promptLibrary, mcp
// with the toolbox server, agentRuntime), the kv plugin and the kvdemo
// pack.
func demoDeployment(tb testing.TB) string {
	tb.Helper()
	var text strings.Builder
	for _, blk := range demoBlocks(tb) {
		text.WriteString(blk.text)
	}
	return text.String()
}

// demoBlock is one capability or pack block of the demo deployment.
type demoBlock struct {
	name   string // the block's label, as ProcessIDs names its process
	pack   bool
	text   string
	binary string // the executable the block starts
}

// demoBlocks returns the blocks of demoDeployment, the kv capability
// first: the pack needs it.
func demoBlocks(tb testing.TB) []demoBlock {
	tb.Helper()
	rules, err := filepath.Abs(testbin.SourceDir("examples/aienvelope/rules.json"))
	if err != nil {
		tb.Fatal(err)
	}
	ai, prompts, mcp, agents := binary(tb, "./plugins/aienvelope"), binary(tb, "./plugins/promptlib"),
		binary(tb, "./plugins/mcp"), binary(tb, "./plugins/agentrt")
	return []demoBlock{
		{name: "kv", text: fmt.Sprintf(`
capability "kv" {
  plugin = %q
  config {
    file = "bench.db"
  }
}
`, bin.kv), binary: bin.kv},
		{name: "ai", text: fmt.Sprintf(`
capability "ai" {
  plugin = %q
  config {
    default_provider = "local"
    provider "local" {
      type  = "local"
      rules = file(%q)
    }
  }
}
`, ai, rules), binary: ai},
		{name: "prompts", text: fmt.Sprintf(`
capability "prompts" {
  plugin   = %q
  families = ["promptLibrary"]
  config {
    dir = "store"
  }
}
`, prompts), binary: prompts},
		{name: "mcp", text: fmt.Sprintf(`
capability "mcp" {
  plugin = %q
  config {
    server "toolbox" {
      command = [%q]
    }
  }
}
`, mcp, binary(tb, "./examples/mcpservers/toolbox")), binary: mcp},
		{name: "agents", text: fmt.Sprintf(`
capability "agents" {
  plugin = %q
  config {
    store_file = "agents.db"
  }
}
`, agents), binary: agents},
		{name: "community.wophost.kvdemo", pack: true, text: fmt.Sprintf(`
pack "community.wophost.kvdemo" {
  path = %q
}
`, bin.kvdemoPack), binary: bin.kvdemo},
	}
}

// start loads the config and starts a host, returning an error unless
// every capability is ready and every pack loaded. The host is returned
// whenever it was created, even with an error, so the caller can Close it.
func start(ctx context.Context, path string) (*host.Host, error) {
	return startWith(ctx, path, host.Options{})
}

// startWith is start with the host's options: a host without a launcher
// (start's) runs its packs uncontained.
func startWith(ctx context.Context, path string, opts host.Options) (*host.Host, error) {
	cfg, ldr, diags := config.Load(path)
	if diags.HasErrors() {
		return nil, errors.New(config.FormatDiagnostics(diags))
	}
	h := host.NewWithOptions(cfg, ldr, hclog.NewNullLogger(), "0.0.0-bench", opts)
	rep := h.Start(ctx)
	if all := rep.All(); all.HasErrors() {
		return h, errors.New(config.FormatDiagnostics(all))
	}
	for _, r := range h.Registry().Records() {
		if r.State != registry.StateReady {
			return h, fmt.Errorf("capability %s is %s, not ready", r.Name, r.State)
		}
	}
	for _, p := range h.Packs() {
		// Degraded only means an optional peer (aiEnvelope) is absent.
		if p.State != host.PackReady && p.State != host.PackDegraded {
			return h, fmt.Errorf("pack %s is %s: %s", p.Name, p.State, p.Error)
		}
	}
	return h, nil
}

// startHost starts a host for tb and closes it when tb ends.
func startHost(tb testing.TB, path string) *host.Host {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	h, err := start(ctx, path)
	if h != nil {
		tb.Cleanup(h.Close)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// startTestcap starts testcap the way the host starts any plugin: start,
// describe, config schema, configure, with no host services behind it.
func startTestcap(ctx context.Context, stateDir string) (*loader.Capability, error) {
	exe, err := loader.OpenExecutable(bin.testcap, loader.Checks{})
	if err != nil {
		return nil, err
	}
	c, err := loader.StartCapability("echo", exe, loader.Options{
		Logger:          hclog.NewNullLogger(),
		LogLevel:        hclog.Off,
		MaxMessageBytes: config.DefaultMaxMessageBytes,
		StartTimeout:    config.DefaultStartTimeout,
		HostVersion:     "0.0.0-bench",
	})
	if err != nil {
		return nil, err
	}
	if _, err := c.Describe(ctx); err != nil {
		c.Kill()
		return nil, err
	}
	if _, err := c.ConfigSchema(ctx); err != nil {
		c.Kill()
		return nil, err
	}
	res, err := c.Configure(ctx, json.RawMessage(`{}`), stateDir, plugin.Storage{}, nil, nil)
	if err == nil && len(res.Diagnostics) > 0 {
		err = fmt.Errorf("testcap refused its config: %+v", res.Diagnostics)
	}
	if err != nil {
		c.Kill()
		return nil, err
	}
	return c, nil
}

// startDirect starts testcap for tb (see startTestcap) and kills it when
// tb ends.
func startDirect(tb testing.TB) *loader.Capability {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := startTestcap(ctx, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Kill)
	return c
}

// loopInput is the probe.loop input for n echo calls.
func loopInput(n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"n":%d,"payload":%s}`, n, payload))
}

// runLoop runs probe.loop once and checks it made n calls.
func runLoop(ctx context.Context, h *host.Host, n int) error {
	res, err := h.Run(ctx, "probe.loop", loopInput(n), host.RunOptions{})
	if err != nil {
		return err
	}
	var out map[string]int
	if err := json.Unmarshal(res.Output, &out); err != nil {
		return fmt.Errorf("probe.loop output %s: %v", res.Output, err)
	}
	if len(out) != 1 || out["calls"] != n {
		return fmt.Errorf("probe.loop output %s, want {\"calls\":%d}", res.Output, n)
	}
	return nil
}

// directCalls makes n raw Invokes on the plugin.
func directCalls(ctx context.Context, c *loader.Capability, n int) error {
	for range n {
		if _, err := c.Invoke(ctx, "test.echo", "echo", []byte(payload), wop.CallContext{}); err != nil {
			return err
		}
	}
	return nil
}

// operatorCalls makes n calls through the host's router, as `host call`
// does.
func operatorCalls(ctx context.Context, h *host.Host, n int) error {
	for range n {
		if _, err := h.Call(ctx, "test.echo", "echo", json.RawMessage(payload), host.RunOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// reportPair reports both per-call costs over n calls and their ratio,
// the figure the benchmark exists for. directUnit names the baseline's
// metric.
func reportPair(b *testing.B, n int, direct, viaHost time.Duration, directUnit string) {
	d := float64(direct.Nanoseconds()) / float64(n)
	h := float64(viaHost.Nanoseconds()) / float64(n)
	b.ReportMetric(d, directUnit)
	b.ReportMetric(h, "host-ns/call")
	b.ReportMetric(h/d, "ratio")
}

// timeCalls warms every path up, then times b.N calls of each, one path
// after the other in one function, so their ratios compare measurements
// taken under the same load. It returns each path's total.
func timeCalls(b *testing.B, paths ...func(n int) error) []time.Duration {
	for _, calls := range paths {
		if err := calls(warmCalls); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	took := make([]time.Duration, len(paths))
	for i, calls := range paths {
		t0 := time.Now()
		err := calls(b.N)
		took[i] = time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	return took
}

// timeRounds times b.N calls of each path split into rounds, the paths
// taking turns within each round, and returns each path's total and each
// round's ratio of the second path's time to the first's. Load that comes
// and goes on a shared machine then moves a round, not the median of
// them. The paths are warmed up by the caller.
func timeRounds(b *testing.B, rounds int, first, second func(n int) error) (took [2]time.Duration, ratios []float64) {
	b.ResetTimer()
	for r := range rounds {
		n := b.N / rounds
		if r == rounds-1 {
			n = b.N - n*(rounds-1)
		}
		if n == 0 {
			continue
		}
		var round [2]time.Duration
		for i, calls := range []func(int) error{first, second} {
			t0 := time.Now()
			err := calls(n)
			round[i] = time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			took[i] += round[i]
		}
		ratios = append(ratios, float64(round[1])/float64(round[0]))
	}
	b.StopTimer()
	return took, ratios
}

// median is the middle of xs (the mean of the two middle ones for an
// even count); xs is sorted in place.
func median(xs []float64) float64 {
	slices.Sort(xs)
	if len(xs) == 0 {
		return 0
	}
	mid := len(xs) / 2
	if len(xs)%2 == 0 {
		return (xs[mid-1] + xs[mid]) / 2
	}
	return xs[mid]
}

// timePair times direct against viaHost (see timeCalls) and reports both.
func timePair(b *testing.B, directUnit string, direct, viaHost func(n int) error) {
	took := timeCalls(b, direct, viaHost)
	reportPair(b, b.N, took[0], took[1], directUnit)
}

// BenchmarkCtxCall compares b.N raw Invokes on testcap with b.N ctx calls
// a pack makes through the host (pack → HostServices → router → Invoke),
// and both with b.N round trips of the same payload over a bare unix
// socket between two processes, the physical floor. The pack side is one
// probe.loop run, so the node's own dispatch is amortised over b.N calls.
func BenchmarkCtxCall(b *testing.B) { ctxCall(b, echoConfig) }

// BenchmarkCtxCallDirect is BenchmarkCtxCall on a direct channel: the
// probe pack's ctx calls go from the pack to testcap under the host's
// grant, one hop.
func BenchmarkCtxCallDirect(b *testing.B) { ctxCall(b, echoConfigDirect) }

// BenchmarkCtxCallGRPC is BenchmarkCtxCall with direct channels off, so
// that the host relays each call on the plugin's gRPC connection.
func BenchmarkCtxCallGRPC(b *testing.B) { ctxCall(b, echoConfigGRPC) }

// BenchmarkCtxCallOneProc is BenchmarkCtxCall with the host (this
// process) at GOMAXPROCS 1, as `gomaxprocs = 1` in the host block sets it;
// the plugin and the pack keep their default.
func BenchmarkCtxCallOneProc(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ctxCall(b, echoConfig)
}

// ctxCall runs BenchmarkCtxCall on a host started with config.
func ctxCall(b *testing.B, config func(testing.TB) string) {
	ctx := context.Background()
	sock := startSocketPeer(b)
	c := startDirect(b)
	h := startHost(b, config(b))
	direct, viaHost := echoMeters(b, c, h)
	took := timeCalls(b, sock.roundTrips,
		direct.wrap(b, func(n int) error { return directCalls(ctx, c, n) }),
		viaHost.wrap(b, func(n int) error { return runLoop(ctx, h, n) }))
	reportPair(b, b.N, took[1], took[2], "direct-ns/call")
	floor := float64(took[0].Nanoseconds()) / float64(b.N)
	b.ReportMetric(floor, "socket-ns/rtt")
	b.ReportMetric(float64(took[2].Nanoseconds())/float64(b.N)/floor, "floor-ratio")
	direct.report(b, "direct-", b.N)
	viaHost.report(b, "", b.N)
}

// echoMeters measure the CPU time of each process on the two echo paths:
// on the direct one this process (the caller) and c's plugin, on the one
// through h the probe pack, h (this process) and h's testcap.
func echoMeters(tb testing.TB, c *loader.Capability, h *host.Host) (direct, viaHost *cpuMeter) {
	direct = newCPUMeter([]string{"caller", "plugin"}, 0, c.PID())
	viaHost = newCPUMeter([]string{"pack", "host", "plugin"},
		processID(tb, h, "private.wophost.probe"), 0, processID(tb, h, "echo"))
	return direct, viaHost
}

// BenchmarkNodeRun compares b.N raw Invokes on testcap with b.N node runs
// that each make one ctx call (probe.call), relayed by the host: what a
// node of one call costs, its run's start and end included, where
// BenchmarkCtxCall spreads them over b.N calls. It reports the CPU per
// run of each process, as BenchmarkCtxCall does per call.
func BenchmarkNodeRun(b *testing.B) { nodeRun(b, echoConfig) }

// BenchmarkNodeRunDirect is BenchmarkNodeRun with the call on a direct
// channel.
func BenchmarkNodeRunDirect(b *testing.B) { nodeRun(b, echoConfigDirect) }

// nodeRun runs BenchmarkNodeRun on a host started with config.
func nodeRun(b *testing.B, config func(testing.TB) string) {
	ctx := context.Background()
	c := startDirect(b)
	h := startHost(b, config(b))
	direct, viaHost := echoMeters(b, c, h)
	timePair(b, "direct-ns/call",
		direct.wrap(b, func(n int) error { return directCalls(ctx, c, n) }),
		viaHost.wrap(b, nodeRuns(ctx, h, "probe.call", probeCallInput(), nil)))
	direct.report(b, "direct-", b.N)
	viaHost.report(b, "", b.N)
	idle, err := idleDirectCalls(ctx, c, b.N, idleGap)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(idle.Nanoseconds())/float64(b.N), "idle-direct-ns/call")
}

// idleGap is how long idleDirectCalls leaves both processes idle before
// each call: about what a node run of one call takes, so that the
// plugin's threads have gone to sleep, as they have when a run's call
// reaches it.
const idleGap = 300 * time.Microsecond

// idleDirectCalls makes n direct Invokes of testcap, each after gap with
// nothing to do, and returns the time the calls took, not the gaps: what
// a round trip costs when it must first wake the processes it crosses.
func idleDirectCalls(ctx context.Context, c *loader.Capability, n int, gap time.Duration) (time.Duration, error) {
	var took time.Duration
	for range n {
		time.Sleep(gap)
		t0 := time.Now()
		if err := directCalls(ctx, c, 1); err != nil {
			return 0, err
		}
		took += time.Since(t0)
	}
	return took, nil
}

// probeCallInput is probe.call's input for one echo call of payload.
func probeCallInput() json.RawMessage {
	return fmt.Appendf(nil, `{"family":"test.echo","method":"echo","payload":%s}`, payload)
}

// nodeRuns returns a path that makes n runs of typeID with input in on h,
// one after the other; check, when not nil, is handed each run's output.
func nodeRuns(ctx context.Context, h *host.Host, typeID string, in json.RawMessage, check func(json.RawMessage) error) func(n int) error {
	return func(n int) error {
		for range n {
			res, err := h.Run(ctx, typeID, in, host.RunOptions{})
			if err != nil {
				return err
			}
			if check != nil {
				if err := check(res.Output); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// BenchmarkOperatorCall is BenchmarkCtxCall without the pack hop: the
// host's routing and checks alone, against the same raw Invoke.
func BenchmarkOperatorCall(b *testing.B) {
	ctx := context.Background()
	c := startDirect(b)
	h := startHost(b, echoConfig(b))
	timePair(b, "direct-ns/call",
		func(n int) error { return directCalls(ctx, c, n) },
		func(n int) error { return operatorCalls(ctx, h, n) })
}

// concurrentCallers is how many callers BenchmarkCtxCallConcurrent runs
// at once on each path.
const concurrentCallers = 16

// inParallel splits n calls over concurrentCallers goroutines running
// calls and returns the first error.
func inParallel(n int, calls func(n int) error) error {
	errs := make(chan error, concurrentCallers)
	for i := range concurrentCallers {
		share := n / concurrentCallers
		if i < n%concurrentCallers {
			share++
		}
		go func() { errs <- calls(share) }()
	}
	var first error
	for range concurrentCallers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// BenchmarkCtxCallConcurrent measures throughput: b.N raw Invokes on
// testcap from 16 goroutines sharing one connection, against b.N ctx calls
// made by 16 probe.loop runs at once through the host. The ratio is the
// host's throughput over the direct one (higher is better).
func BenchmarkCtxCallConcurrent(b *testing.B) { ctxCallConcurrent(b, echoConfig) }

// BenchmarkCtxCallConcurrentDirect is BenchmarkCtxCallConcurrent on
// direct channels: each of the 16 runs calls testcap on its own grant,
// over the pack's one connection to the channel.
func BenchmarkCtxCallConcurrentDirect(b *testing.B) { ctxCallConcurrent(b, echoConfigDirect) }

// BenchmarkCtxCallConcurrentOneProc is BenchmarkCtxCallConcurrent with the
// host at GOMAXPROCS 1 (see BenchmarkCtxCallOneProc).
func BenchmarkCtxCallConcurrentOneProc(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ctxCallConcurrent(b, echoConfig)
}

// ctxCallConcurrent runs BenchmarkCtxCallConcurrent on a host started
// with config.
func ctxCallConcurrent(b *testing.B, config func(testing.TB) string) {
	ctx := context.Background()
	c := startDirect(b)
	h := startHost(b, config(b))
	directCPU, viaHostCPU := echoMeters(b, c, h)
	took := timeCalls(b,
		directCPU.wrap(b, func(n int) error {
			return inParallel(n, func(n int) error { return directCalls(ctx, c, n) })
		}),
		viaHostCPU.wrap(b, func(n int) error {
			return inParallel(n, func(n int) error {
				if n == 0 {
					return nil
				}
				return runLoop(ctx, h, n)
			})
		}))
	direct := float64(b.N) / took[0].Seconds()
	viaHost := float64(b.N) / took[1].Seconds()
	b.ReportMetric(direct, "direct-calls/s")
	b.ReportMetric(viaHost, "host-calls/s")
	b.ReportMetric(viaHost/direct, "ratio")
	directCPU.report(b, "direct-", b.N)
	viaHostCPU.report(b, "", b.N)
}

// BenchmarkStartToReady measures config.Load + host.New + Start until the
// five capabilities of demoConfig are ready and the kvdemo pack loaded,
// against the start floor measured in the same run: every one of those
// six processes started alone (soloStarts), the floor being the slowest
// of them or their summed CPU time over GOMAXPROCS, whichever is larger
// (startFloor) — no host can start them all sooner. One plugin's start
// alone (testcap) is kept as plugin-ms/start. Close is not timed.
// It runs min(b.N, maxStarts) starts of each (see maxStarts) and overrides
// ns/op with the per-start time, so ns/op stays true when fewer than b.N
// ran.
func BenchmarkStartToReady(b *testing.B) {
	path := demoConfig(b)
	solos := soloStarts(b)
	var paths []string
	for _, blk := range demoBlocks(b) {
		paths = append(paths, blk.binary)
	}
	bare := newBareTimes(paths)
	n := min(b.N, maxStarts)
	b.ResetTimer()
	var plugin, ready, pluginCPU, readyCPU, hostCPU time.Duration
	soloWall := make([]time.Duration, len(solos))
	soloCPU := make([]time.Duration, len(solos))
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		for i, s := range solos {
			wall, cpu, err := s.run(ctx, b)
			if err != nil {
				cancel()
				b.Fatal(err)
			}
			soloWall[i] += wall
			soloCPU[i] += cpu
		}
		if err := bare.measure(); err != nil {
			cancel()
			b.Fatal(err)
		}
		t0 := time.Now()
		c, err := startTestcap(ctx, b.TempDir())
		plugin += time.Since(t0)
		if c != nil {
			pluginCPU += treeCPUOf(b, c.PID())
			c.Kill()
		}
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		hostBefore := cpuOf(b, 0)
		t0 = time.Now()
		h, err := start(ctx, path)
		ready += time.Since(t0)
		hostCPU += cpuOf(b, 0) - hostBefore
		if h != nil {
			for _, pid := range h.ProcessIDs() {
				readyCPU += treeCPUOf(b, pid)
			}
		}
		cancel()
		// Close before failing: no plugin or pack may outlive the run.
		if h != nil {
			h.Close()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	per := float64(ready.Nanoseconds()) / float64(n)
	b.ReportMetric(per, "ns/op")
	b.ReportMetric(per/1e6, "ms/ready")
	reportStartFloor(b, soloWall, soloCPU, n)
	bare.report(b)
	b.ReportMetric(float64(plugin.Nanoseconds())/float64(n)/1e6, "plugin-ms/start")
	// The CPU each start used until ready: the host and every process it
	// started, with theirs (the MCP servers of the mcp plugin), against
	// the one plugin's. Per process to a clock tick (procCPU), so a sum of
	// many processes reads a few ticks low.
	b.ReportMetric(float64((readyCPU+hostCPU).Nanoseconds())/float64(n)/1e6, "cpu-ms/ready")
	// The host's own share, which the floor leaves out: what it spends
	// launching, handshaking with and checking the six.
	b.ReportMetric(float64(hostCPU.Nanoseconds())/float64(n)/1e6, "host-cpu-ms/ready")
	b.ReportMetric(float64(pluginCPU.Nanoseconds())/float64(n)/1e6, "plugin-cpu-ms/start")
}

// TestBenchSetup runs every benchmark's setup once, so `go test` catches
// a broken setup without running the benchmarks.
func TestBenchSetup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	c := startDirect(t)
	out, err := c.Invoke(ctx, "test.echo", "echo", []byte(payload), wop.CallContext{})
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, "direct echo", out, payload)

	h := startHost(t, echoConfig(t))
	res, err := h.Run(ctx, "probe.loop", loopInput(10), host.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, "probe.loop", res.Output, `{"calls":10}`)
	out, err = h.Call(ctx, "test.echo", "echo", json.RawMessage(payload), host.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, "operator echo", out, payload)

	demo, err := start(ctx, demoConfig(t))
	if demo != nil {
		demo.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range soloStarts(t) {
		wall, cpu, err := s.run(ctx, t)
		if err != nil {
			t.Fatal(err)
		}
		// Every process runs some code before it is ready; a zero would
		// mean the wrong process or none was read.
		if wall <= 0 || cpu <= 0 {
			t.Fatalf("solo start of %s: wall %v, cpu %v", s.name, wall, cpu)
		}
		t.Logf("solo start of %s: wall %v, cpu %v", s.name, wall, cpu)
	}
	sock := startSocketPeer(t)
	if err := sock.roundTrips(3); err != nil {
		t.Fatal(err)
	}
}

// assertJSON compares JSON texts ignoring formatting.
func assertJSON(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w bytes.Buffer
	if err := json.Compact(&g, got); err != nil {
		t.Fatalf("%s: output %q is not JSON: %v", what, got, err)
	}
	if err := json.Compact(&w, []byte(want)); err != nil {
		t.Fatal(err)
	}
	if g.String() != w.String() {
		t.Fatalf("%s: got %s, want %s", what, g.String(), w.String())
	}
}
