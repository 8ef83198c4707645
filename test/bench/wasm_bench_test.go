package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/wasm"
	"github.com/wophost/wophost/test/testbin"
)

// The WebAssembly packs of the benchmarks: wasmcall is written by hand in
// WebAssembly text, wasmgocall with the Go SDK (sdk/wasmpack). Each has one
// node that makes one host-service call.
const (
	watPackName = "community.wophost.wasmcall"
	goPackName  = "community.wophost.wasmgocall"
	watCallNode = "wasmcall.call"
	goCallNode  = "wasmgocall.call"
)

// maxWasmGoRuns caps BenchmarkNodeRunWasmGo's runs of each path: a run of
// the Go SDK pack makes a Go runtime start in a fresh instance, tens of
// milliseconds, and `make bench`'s 2000 runs would take a minute.
const maxWasmGoRuns = 200

// maxWasmLoads caps BenchmarkWasmStart's loads of each kind: a cold load
// compiles several megabytes of Go-built module, seconds on two cores,
// and more loads would not make the per-load figure better.
const maxWasmLoads = 3

// warmForHeap is how many warm instances BenchmarkWasmInstanceMemory keeps
// to weigh one in the host's heap.
const warmForHeap = 4

// watPackDir lays out the wasmcall pack, its committed module included, in
// a fresh directory.
func watPackDir(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "wasmcall")
	if err := testbin.LayOutPack("test/packs/wasmcall", testbin.SourceDir("test/packs/wasmcall/wasmcall.wasm"), dir); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// goPackDir builds the wasmgocall pack for wasip1 once and returns its
// directory, shared: callers must not write into it.
func goPackDir(tb testing.TB) string {
	tb.Helper()
	dir, err := bin.cache.Pack("test/packs/wasmgocall")
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

// wasmEchoConfig is echoConfig's deployment (testcap serving test.echo,
// the probe pack, its calls routed through the host) with the named
// WebAssembly packs (watPackName, goPackName) added. A WebAssembly node's
// calls always take the routed path: the host is its only way out.
func wasmEchoConfig(tb testing.TB, packs ...string) string {
	tb.Helper()
	text := routedEchoDeployment()
	for _, name := range packs {
		var dir string
		switch name {
		case watPackName:
			dir = watPackDir(tb)
		case goPackName:
			dir = goPackDir(tb)
		default:
			tb.Fatalf("no WebAssembly pack %q in the benchmarks", name)
		}
		text += fmt.Sprintf("pack %q {\n  path = %q\n}\n", name, dir)
	}
	return writeConfig(tb, text)
}

// watCallAnswer checks the output of wasmcall.call: wophost_call's answer
// as it came, which is {"error": …} when the call was refused, and that
// run still completes.
func watCallAnswer(out json.RawMessage) error {
	if !bytes.HasPrefix(out, []byte(`{"result":`)) {
		return fmt.Errorf("%s answered %s, not a call's result", watCallNode, out)
	}
	return nil
}

// BenchmarkNodeRunWasm is BenchmarkNodeRun with the node in a WebAssembly
// pack written in WebAssembly text (wasmcall.call, one echo call of the
// same payload): b.N raw Invokes on testcap against b.N node runs, each on
// a fresh instance, its call routed by the host. It reports the CPU per
// run of the host (which runs the module) and of the plugin.
func BenchmarkNodeRunWasm(b *testing.B) {
	wasmNodeRun(b, watPackName, watCallNode, []byte(payload), watCallAnswer, b.N)
}

// BenchmarkNodeRunWasmGo is BenchmarkNodeRunWasm with the node built with
// the Go SDK (wasmgocall.call, the input of probe.call): every instance
// starts a Go runtime. It makes min(b.N, maxWasmGoRuns) calls and runs
// of each path, and ns/op is over those.
func BenchmarkNodeRunWasmGo(b *testing.B) {
	wasmNodeRun(b, goPackName, goCallNode, probeCallInput(), nil, min(b.N, maxWasmGoRuns))
}

// wasmNodeRun runs BenchmarkNodeRunWasm for typeID of the WebAssembly pack
// named pack, with input in and its output checked by check, timing n
// calls and n runs.
func wasmNodeRun(b *testing.B, pack, typeID string, in []byte, check func(json.RawMessage) error, n int) {
	ctx := context.Background()
	c := startDirect(b)
	h := startHost(b, wasmEchoConfig(b, pack))
	direct := newCPUMeter([]string{"caller", "plugin"}, 0, c.PID())
	viaHost := newCPUMeter([]string{"host", "plugin"}, 0, processID(b, h, "echo"))
	// timeCalls asks for b.N of each; the timed run makes n.
	upTo := func(calls func(int) error) func(int) error {
		return func(k int) error { return calls(min(k, n)) }
	}
	took := timeCalls(b,
		direct.wrap(b, upTo(func(k int) error { return directCalls(ctx, c, k) })),
		viaHost.wrap(b, upTo(nodeRuns(ctx, h, typeID, in, check))))
	reportPair(b, n, took[0], took[1], "direct-ns/call")
	b.ReportMetric(float64((took[0]+took[1]).Nanoseconds())/float64(n), "ns/op")
	direct.report(b, "direct-", n)
	viaHost.report(b, "", n)
}

// BenchmarkNodeRunWasmVsProcess compares, on one host, b.N node runs of
// probe.call in the probe pack's process with b.N runs of wasmcall.call
// in process, both making one echo call of the same payload on the routed
// path: what running the node in the host saves over a process hop. It
// reports each path's CPU per run (the process path's pack included).
func BenchmarkNodeRunWasmVsProcess(b *testing.B) {
	ctx := context.Background()
	h := startHost(b, wasmEchoConfig(b, watPackName))
	plugin := processID(b, h, "echo")
	processCPU := newCPUMeter([]string{"pack", "host", "plugin"}, processID(b, h, "private.wophost.probe"), 0, plugin)
	wasmCPU := newCPUMeter([]string{"host", "plugin"}, 0, plugin)
	took := timeCalls(b,
		processCPU.wrap(b, nodeRuns(ctx, h, "probe.call", probeCallInput(), nil)),
		wasmCPU.wrap(b, nodeRuns(ctx, h, watCallNode, []byte(payload), watCallAnswer)))
	proc := float64(took[0].Nanoseconds()) / float64(b.N)
	wasmRun := float64(took[1].Nanoseconds()) / float64(b.N)
	b.ReportMetric(proc, "process-ns/run")
	b.ReportMetric(wasmRun, "wasm-ns/run")
	b.ReportMetric(wasmRun/proc, "wasm/process")
	processCPU.report(b, "process-", b.N)
	wasmCPU.report(b, "wasm-", b.N)
}

// goModule reads the Go SDK pack's module, built for wasip1.
func goModule(tb testing.TB) []byte {
	tb.Helper()
	return readModule(tb, filepath.Join(goPackDir(tb), "wasmgocall.wasm"))
}

// watModule reads the wasmcall pack's committed module.
func watModule(tb testing.TB) []byte {
	tb.Helper()
	return readModule(tb, testbin.SourceDir("test/packs/wasmcall/wasmcall.wasm"))
}

func readModule(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// newWasmEngine makes an engine whose compilation cache is dir ("" for
// one in memory), closed when tb ends.
func newWasmEngine(tb testing.TB, dir string) *wasm.Engine {
	tb.Helper()
	e, err := wasm.NewEngine(dir, hclog.NewNullLogger())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

// sharedWasmCache is a compilation cache directory every engine of the
// benchmark binary may share, so that the Go SDK pack's module, seconds to
// compile, is compiled once. BenchmarkWasmStart keeps its own.
func sharedWasmCache() string { return filepath.Join(bin.dir, "wasm-cache") }

// timeLoad makes an engine on the cache dir, times one Load of module on
// it and closes both untimed.
func timeLoad(tb testing.TB, dir string, module []byte) time.Duration {
	tb.Helper()
	ctx := context.Background()
	e, err := wasm.NewEngine(dir, hclog.NewNullLogger())
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = e.Close(ctx) }()
	t0 := time.Now()
	m, err := e.Load(ctx, module, wasm.LoadOptions{})
	took := time.Since(t0)
	if err != nil {
		tb.Fatal(err)
	}
	_ = m.Close(ctx)
	return took
}

// BenchmarkWasmStart times Engine.Load of the Go SDK pack's module (compile,
// checks, one instance started to read the pack's name and nodes) on an
// engine with an empty compilation cache directory, then on a second
// engine on the same directory, filled by the first: a host's first start
// against its later ones. It runs min(b.N, maxWasmLoads) of each and
// overrides ns/op with the cold load; the WAT pack's cold load is
// reported beside it.
func BenchmarkWasmStart(b *testing.B) {
	goMod, watMod := goModule(b), watModule(b)
	n := min(b.N, maxWasmLoads)
	b.ResetTimer()
	var cold, warm, watCold time.Duration
	for range n {
		dir := b.TempDir()
		cold += timeLoad(b, dir, goMod)
		warm += timeLoad(b, dir, goMod)
		watCold += timeLoad(b, b.TempDir(), watMod)
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) }
	b.ReportMetric(per(cold), "ns/op")
	b.ReportMetric(per(cold)/1e6, "cold-ms/load")
	b.ReportMetric(per(warm)/1e6, "warm-ms/load")
	b.ReportMetric(per(warm)/per(cold), "warm/cold")
	b.ReportMetric(per(watCold)/1e6, "wat-cold-ms/load")
}

// BenchmarkWasmInstanceMemory reports what one instance of each
// WebAssembly pack holds: its linear memory at the end of a run of its
// node (wat- and go-linear-KiB/instance), and for the Go SDK pack the
// growth of the host's Go heap per warm instance (go-heap-KiB/instance),
// from a module loaded with warmForHeap warm instances against the same
// module loaded with none. It runs once, whatever b.N: the figures are
// sizes, not times.
func BenchmarkWasmInstanceMemory(b *testing.B) {
	eng := newWasmEngine(b, sharedWasmCache())
	watLinear := linearAfterRun(b, eng, watModule(b), watCallNode, json.RawMessage(payload))
	goMod := goModule(b)
	goLinear := linearAfterRun(b, eng, goMod, goCallNode, probeCallInput())
	heap := heapPerWarmInstance(b, eng, goMod)
	b.ReportMetric(float64(watLinear)/1024, "wat-linear-KiB/instance")
	b.ReportMetric(float64(goLinear)/1024, "go-linear-KiB/instance")
	b.ReportMetric(heap/1024, "go-heap-KiB/instance")
}

// linearAfterRun loads module, runs typeID once with input and answers
// the linear memory of that run's instance.
func linearAfterRun(tb testing.TB, eng *wasm.Engine, module []byte, typeID string, input json.RawMessage) int64 {
	tb.Helper()
	ctx := context.Background()
	m, err := eng.Load(ctx, module, wasm.LoadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = m.Close(ctx) }()
	resp, err := m.Invoke(ctx, wasm.Invocation{TypeID: typeID, Request: wasm.Request{Inputs: input}, Imports: echoImports{}})
	if err != nil {
		tb.Fatal(err)
	}
	if resp.Outcome != wasm.OutcomeCompleted {
		tb.Fatalf("%s: %s %+v", typeID, resp.Outcome, resp.Error)
	}
	return m.LastInstanceMemoryBytes()
}

// heapPerWarmInstance answers how much the live Go heap grows per warm
// instance of module: the growth of a load with warmForHeap warm
// instances less that of a load with none, over warmForHeap. A first
// load, not counted, fills the engine's compilation cache.
func heapPerWarmInstance(tb testing.TB, eng *wasm.Engine, module []byte) float64 {
	tb.Helper()
	ctx := context.Background()
	load := func(warm int) (*wasm.Module, int64) {
		before := liveHeap()
		m, err := eng.Load(ctx, module, wasm.LoadOptions{WarmInstances: warm})
		if err != nil {
			tb.Fatal(err)
		}
		deadline := time.Now().Add(startTimeout)
		for m.WarmReady() < warm {
			if time.Now().After(deadline) {
				tb.Fatalf("%d of %d warm instances ready after %s", m.WarmReady(), warm, startTimeout)
			}
			time.Sleep(time.Millisecond)
		}
		return m, liveHeap() - before
	}
	first, _ := load(0)
	none, without := load(0)
	some, with := load(warmForHeap)
	for _, m := range []*wasm.Module{first, none, some} {
		_ = m.Close(ctx)
	}
	return float64(with-without) / warmForHeap
}

// liveHeap is the Go heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// echoImports answers a module's imports outside a host: wophost_call
// echoes its payload, the advertisement names test.echo, the clock is 0,
// and the rest is refused, which ends the invocation.
type echoImports struct{}

var _ wasm.Imports = echoImports{}

var errNotServed = errors.New("not served by the benchmark's imports")

func (echoImports) ChannelRead(context.Context, string) ([]byte, bool, error) {
	return nil, false, errNotServed
}
func (echoImports) ChannelWrite(context.Context, string, []byte) (wasm.Status, error) {
	return wasm.StatusHostError, errNotServed
}
func (echoImports) VariableGet(context.Context, string) ([]byte, bool, error) {
	return nil, false, errNotServed
}
func (echoImports) VariableSet(context.Context, string, []byte) (wasm.Status, error) {
	return wasm.StatusHostError, errNotServed
}
func (echoImports) Interrupt(context.Context, []byte) ([]byte, error) { return nil, errNotServed }
func (echoImports) Log(int, string)                                   {}
func (echoImports) NowMs(context.Context) (int64, error)              { return 0, nil }
func (echoImports) Random(context.Context, int) ([]byte, error)       { return nil, errNotServed }
func (echoImports) Call(_ context.Context, family, method string, payload []byte) ([]byte, error) {
	if family != "test.echo" || method != "echo" {
		return nil, fmt.Errorf("%s.%s: %w", family, method, errNotServed)
	}
	return payload, nil
}
func (echoImports) Advertised(context.Context) ([]byte, error) {
	return []byte(`{"test.echo":{}}`), nil
}

// TestWasmBenchSetup runs the WebAssembly benchmarks' setup once: both
// packs load on a host and answer the echo call with the payload, and
// both modules run on echoImports.
func TestWasmBenchSetup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	h := startHost(t, wasmEchoConfig(t, watPackName, goPackName))
	res, err := h.Run(ctx, watCallNode, json.RawMessage(payload), host.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, watCallNode, res.Output, `{"result":`+payload+`}`)
	res, err = h.Run(ctx, goCallNode, probeCallInput(), host.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, goCallNode, res.Output, payload)

	// A refused call still completes the WAT node's run: the benchmark's
	// check must tell it from a result.
	if err := watCallAnswer(json.RawMessage(`{"error":{"code":"capability_breach","message":"no"}}`)); err == nil {
		t.Error("watCallAnswer took a refusal for a result")
	}

	eng := newWasmEngine(t, sharedWasmCache())
	if got := linearAfterRun(t, eng, watModule(t), watCallNode, json.RawMessage(payload)); got != 64<<10 {
		t.Errorf("%s: linear memory %d bytes after a run, want its one page", watCallNode, got)
	}
	if got := linearAfterRun(t, eng, goModule(t), goCallNode, probeCallInput()); got <= 64<<10 {
		t.Errorf("%s: linear memory %d bytes after a run, want the Go runtime's heap", goCallNode, got)
	}
}
