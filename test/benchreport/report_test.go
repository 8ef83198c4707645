package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// oneRun is a -count 1 run with every figure's metrics, each value
// distinct so a test can change one by replacing its text.
const oneRun = `goos: linux
goarch: amd64
pkg: github.com/wophost/wophost/test/bench
cpu: AMD EPYC 7B13
BenchmarkCtxCall-2               	    2000	    719178 ns/op	    196672 direct-ns/call	         8.449 floor-ratio	    522506 host-ns/call	         2.657 ratio	     61840 socket-ns/rtt
BenchmarkCtxCallDirect-2         	    2000	    512004 ns/op	    201311 direct-ns/call	         3.188 floor-ratio	    197140 host-ns/call	         0.9793 ratio	     61840 socket-ns/rtt
BenchmarkCtxCallGRPC-2           	    2000	    931202 ns/op	    198340 direct-ns/call	        10.912 floor-ratio	    674733 host-ns/call	         3.402 ratio	     61834 socket-ns/rtt
BenchmarkCtxCallOneProc-2        	    2000	    540112 ns/op	    135423 direct-ns/call	         8.649 floor-ratio	    366825 host-ns/call	         2.709 ratio	     42411 socket-ns/rtt
BenchmarkOperatorCall-2          	    2000	    545120 ns/op	    195340 direct-ns/call	    349780 host-ns/call	         1.791 ratio
BenchmarkNodeRunWasm-2           	    2000	   1131789 ns/op	    372631 direct-ns/call	    759134 host-ns/call	         2.037 ratio
BenchmarkNodeRunWasmGo-2         	    2000	  29888136 ns/op	    310362 direct-ns/call	  29577742 host-ns/call	        95.30 ratio
BenchmarkNodeRunWasmVsProcess-2  	    2000	   2437058 ns/op	   1576004 process-ns/run	    861024 wasm-ns/run	         0.5463 wasm/process
BenchmarkWasmStart-2             	    2000	3027789474 ns/op	      3028 cold-ms/load	       315.9 warm-ms/load	         0.1043 warm/cold	         4.533 wat-cold-ms/load
BenchmarkWasmInstanceMemory-2    	    2000	  15210988 ns/op	      7231 go-heap-KiB/instance	      5120 go-linear-KiB/instance	        64.00 wat-linear-KiB/instance
BenchmarkGRPCRoundTrip-2         	    2000	    452310 ns/op	    227480 direct-ns/call	    160314 grpc-ns/rtt	     47120 socket-ns/rtt
BenchmarkNodeRun-2               	    2000	   1417176 ns/op	    260752 direct-ns/call	   1156421 host-ns/call	         4.435 ratio
BenchmarkNodeRunDirect-2         	    2000	   1460374 ns/op	    289618 direct-ns/call	   1170754 host-ns/call	    601230 idle-direct-ns/call	         4.042 ratio
BenchmarkNodeRunContained-2      	    2000	   1669348 ns/op	    832433 contained-ns/run	         0.9947 contained/uncontained	    836906 uncontained-ns/run
BenchmarkPackStartContained-2    	    2000	  51801171 ns/op	        51.80 contained-ms/start	         1.505 contained/uncontained	       106.7 host-launcher-ms/start	        34.42 uncontained-ms/start
BenchmarkCtxCallConcurrent-2     	    2000	     88213 ns/op	     18420 direct-calls/s	     11336 host-calls/s	         0.6154 ratio
BenchmarkCtxCallConcurrentDirect-2	    2000	     61210 ns/op	     18310 direct-calls/s	     16342 host-calls/s	         0.8925 ratio
BenchmarkCtxCallConcurrentOneProc-2	    2000	     57400 ns/op	     17392 direct-calls/s	      7142 host-calls/s	         0.4106 ratio
BenchmarkStartToReady-2          	    2000	 168420113 ns/op	       168.4 ms/ready	        84.10 floor-ms/start	        70.20 bare-floor-ms/start	        86.30 bare-ms/start	        24.61 plugin-ms/start
BenchmarkIdleMemory-2            	    2000	2004312877 ns/op	        31.42 host-MB	        18.77 plugin-MB
BenchmarkMCPCallTool-2           	    2000	    412087 ns/op	    235777 host-ns/call	         1.337 ratio	    176310 sdk-ns/call
BenchmarkMCPCallToolFromPack-2   	    2000	    598210 ns/op	    422308 host-ns/call	         2.401 ratio	    175902 sdk-ns/call
BenchmarkServeExecute-2          	    2000	    221336 ns/op	      1712 p50-µs	      4890 p99-µs	      4518 req/s
BenchmarkServeExecuteVsRun-2     	    1000	   4257960 ns/op	   1886730 run-ns/run	   2371199 serve-ns/run	         1.257 serve/run
BenchmarkAIEnvelopeGenerate-2    	    2000	   1288410 ns/op	    201388 direct-p50-ns	    512904 node-p50-ns	         2.547 node/direct-p50
BenchmarkPromptGet-2             	    2000	    301554 ns/op	       287.4 p50-µs	       612.9 p99-µs
BenchmarkRunLogCtxCall-2         	    2000	   1505272 ns/op	    782257 logged-ns/call	         1.082 logged/unlogged	    723013 unlogged-ns/call
BenchmarkRunLogCtxCallDirect-2   	    2000	    751400 ns/op	    390112 logged-ns/call	         1.089 logged/unlogged	    358230 unlogged-ns/call
BenchmarkReplayCouncil-2         	    2000	   4875226 ns/op	   4875226 replay-ns	         0.1711 replay/run	  28489630 run-ns
BenchmarkPostgresAIEnvelopeGenerate-2	    2000	   6345034 ns/op	   2774397 embedded-ns/call	   2483587 embedded-p50-ns	         1.287 pg/embedded	   3569974 postgres-ns/call	   2880290 postgres-p50-ns
BenchmarkPostgresPromptGet-2     	    2000	   3739337 ns/op	   1495682 embedded-ns/call	    813525 embedded-p50-ns	         1.500 pg/embedded	   2243246 postgres-ns/call	   1034956 postgres-p50-ns
BenchmarkPostgresAgentMessage-2  	    2000	  49735050 ns/op	  23189371 embedded-ns/call	  22033893 embedded-p50-ns	         1.145 pg/embedded	  26544586 postgres-ns/call	  24517620 postgres-p50-ns
BenchmarkPostgresServeExecute-2  	    2000	  26165138 ns/op	  14625342 embedded-ns/call	  13218382 embedded-p50-ns	         0.7888 pg/embedded	  11537172 postgres-ns/call	   9898286 postgres-p50-ns
PASS
ok  	github.com/wophost/wophost/test/bench	41.120s
`

// edit returns s with each old text, which must occur exactly once,
// replaced by the text after it.
func edit(t *testing.T, s string, oldNew ...string) string {
	t.Helper()
	for i := 0; i < len(oldNew); i += 2 {
		if n := strings.Count(s, oldNew[i]); n != 1 {
			t.Fatalf("%q occurs %d times, want once", oldNew[i], n)
		}
		s = strings.Replace(s, oldNew[i], oldNew[i+1], 1)
	}
	return s
}

// dropLine returns s without its lines starting with prefix.
func dropLine(s, prefix string) string {
	var b strings.Builder
	for l := range strings.Lines(s) {
		if !strings.HasPrefix(l, prefix) {
			b.WriteString(l)
		}
	}
	return b.String()
}

func mustParse(t *testing.T, in string) *results {
	t.Helper()
	r, err := parseResults(strings.NewReader(in), "input")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// table renders in as the report would, for use as a committed table.
func table(t *testing.T, in string) string {
	t.Helper()
	r := mustParse(t, in)
	return render(r, measure(r, figures()))
}

func TestParseResults(t *testing.T) {
	type want struct {
		bench, unit string
		value       float64
	}
	tests := []struct {
		name   string
		in     string
		procs  int
		want   []want
		absent []want // bench and unit only
	}{
		{
			name: "median of an odd count",
			in: "BenchmarkA-4 10 3 ns/op\n" +
				"BenchmarkA-4 10 1 ns/op\n" +
				"BenchmarkA-4 10 100 ns/op\n",
			procs: 4,
			want:  []want{{"BenchmarkA", "ns/op", 3}},
		},
		{
			name: "median of an even count is the mean of the middle two",
			in: "BenchmarkA-2 10 4 ns/op 7 x\n" +
				"BenchmarkA-2 10 1 ns/op 7 x\n" +
				"BenchmarkA-2 10 2 ns/op 7 x\n" +
				"BenchmarkA-2 10 9 ns/op 7 x\n",
			procs: 2,
			want:  []want{{"BenchmarkA", "ns/op", 3}, {"BenchmarkA", "x", 7}},
		},
		{
			name:  "no suffix means GOMAXPROCS 1",
			in:    "BenchmarkA 10 5 ns/op\n",
			procs: 1,
			want:  []want{{"BenchmarkA", "ns/op", 5}},
		},
		{
			name:  "sub-benchmark keeps its path, loses the suffix",
			in:    "BenchmarkA/size-64-8 10 5 ns/op\n",
			procs: 8,
			want:  []want{{"BenchmarkA/size-64", "ns/op", 5}},
		},
		{
			name: "units with µ and slashes",
			in:   "BenchmarkA-2\t 2000\t 287.4 p50-µs\t 2.547 node/direct-p50\t 11336 host-calls/s\t 0.0001234 B/op\n",
			want: []want{
				{"BenchmarkA", "p50-µs", 287.4},
				{"BenchmarkA", "node/direct-p50", 2.547},
				{"BenchmarkA", "host-calls/s", 11336},
				{"BenchmarkA", "B/op", 0.0001234},
			},
			procs: 2,
		},
		{
			name: "other lines are ignored",
			in: "goos: linux\n" +
				"=== RUN   TestSomething\n" +
				"2026-08-21T10:14:03.512Z [WARN]  plugin.testcap: closing idle stream\n" +
				"BenchmarkA-2 10 5 ns/op\n" +
				"--- FAIL: BenchmarkB-2\n" +
				"    bench_test.go:42: 3 plugins did not start\n" +
				"--- BENCH: BenchmarkA-2\n" +
				"    bench_test.go:12: 10 iterations\n" +
				"PASS\n" +
				"FAIL\n" +
				"ok  \tgithub.com/wophost/wophost/test/bench\t1.2s\n",
			procs: 2,
			want:  []want{{"BenchmarkA", "ns/op", 5}},
		},
		{
			name: "a failed benchmark has no figures",
			in: "BenchmarkB-2   \t--- FAIL: BenchmarkB-2\n" +
				"    bench_test.go:42: 12 calls failed\n" +
				"BenchmarkA-2 10 5 ns/op\n",
			procs:  2,
			want:   []want{{"BenchmarkA", "ns/op", 5}},
			absent: []want{{bench: "BenchmarkB", unit: "ns/op"}},
		},
		{
			name: "results pushed to a later line by the benchmark's own output",
			in: "BenchmarkA-2   \tplugin says hello\n" +
				"more output\n" +
				"    2000\t  719178 ns/op\t 2.5 ratio\n",
			procs: 2,
			want:  []want{{"BenchmarkA", "ns/op", 719178}, {"BenchmarkA", "ratio", 2.5}},
		},
		{
			name: "header lines",
			in: "goos: linux\ngoarch: arm64\npkg: example.com/x\ncpu: Neoverse-N1  \n" +
				"BenchmarkA-2 10 5 ns/op\n",
			procs: 2,
			want:  []want{{"BenchmarkA", "ns/op", 5}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustParse(t, tt.in)
			if r.procs != tt.procs {
				t.Errorf("procs = %d, want %d", r.procs, tt.procs)
			}
			for _, w := range tt.want {
				got, ok := r.metric(w.bench, w.unit)
				if !ok || got != w.value {
					t.Errorf("metric(%s, %s) = %v, %v; want %v", w.bench, w.unit, got, ok, w.value)
				}
			}
			for _, w := range tt.absent {
				if got, ok := r.metric(w.bench, w.unit); ok {
					t.Errorf("metric(%s, %s) = %v, want absent", w.bench, w.unit, got)
				}
			}
		})
	}
}

func TestParseHeader(t *testing.T) {
	r := mustParse(t, "goos: linux\ngoarch: arm64\npkg: example.com/x\ncpu: Neoverse-N1  \nBenchmarkA-2 10 5 ns/op\n")
	if r.goos != "linux" || r.goarch != "arm64" || r.cpu != "Neoverse-N1" {
		t.Errorf("goos, goarch, cpu = %q, %q, %q", r.goos, r.goarch, r.cpu)
	}
	if got, want := machineLine(r), "Measured on linux/arm64, Neoverse-N1, GOMAXPROCS 2"; got != want {
		t.Errorf("machineLine = %q, want %q", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty input", "", "no benchmark results"},
		{"no benchmark lines", "goos: linux\nPASS\nok  \tx\t0.1s\n", "no benchmark results"},
		{"only failed benchmarks", "BenchmarkA-2 \t--- FAIL: BenchmarkA-2\nFAIL\n", "no benchmark results"},
		{"odd value-unit pairs", "BenchmarkA-2 10 5 ns/op 7\n", "input:1: BenchmarkA-2: want value-unit pairs"},
		{"value not a number", "goos: linux\nBenchmarkA-2 10 5 ns/op x ratio\n", "input:2: BenchmarkA-2: value of ratio"},
		{"GOMAXPROCS mixed", "BenchmarkA-2 10 5 ns/op\nBenchmarkA-4 10 5 ns/op\n", "GOMAXPROCS [2 4]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseResults(strings.NewReader(tt.in), "input")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestSample(t *testing.T) {
	f, err := os.Open("testdata/bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := parseResults(f, "testdata/bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	// -count 3: the medians, not the first or last run.
	for _, w := range []struct {
		bench, unit string
		value       float64
	}{
		{"BenchmarkCtxCall", "host-ns/call", 522506},
		{"BenchmarkCtxCall", "ratio", 2.657},
		{"BenchmarkCtxCallConcurrent", "ratio", 0.6154},
		{"BenchmarkServeExecute", "req/s", 4518},
		{"BenchmarkPromptGetFromNode", "p99-µs", 988.4},
	} {
		if got, ok := r.metric(w.bench, w.unit); !ok || got != w.value {
			t.Errorf("metric(%s, %s) = %v, %v; want %v", w.bench, w.unit, got, ok, w.value)
		}
	}
	got := render(r, measure(r, figures()))
	want, err := os.ReadFile("testdata/bench.md")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("table differs from testdata/bench.md; got:\n%s", got)
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		f     format
		x     float64
		shown float64
		text  string
	}{
		{nanosAsMicros(), 196672, 196.7, "196.7 µs"},
		{nanosAsMicros(), 61840, 61.8, "61.8 µs"},
		{nanosAsMicros(), 1288410, 1288.4, "1288.4 µs"},
		{nanosAsMillis(), 23189371, 23.19, "23.19 ms"},
		{micros(), 287.4, 287.4, "287.4 µs"},
		{millis(), 168.4, 168.4, "168.4 ms"},
		{millis(), 24.61, 24.6, "24.6 ms"},
		{megabytes(), 31.42, 31.4, "31.4 MB"},
		{megabytes(), 18.77, 18.8, "18.8 MB"},
		{kibibytes(), 5120, 5120, "5120 KiB"},
		{kibibytes(), 7231.4, 7231, "7231 KiB"},
		{perSecond("calls/s"), 11336.4, 11336, "11336 calls/s"},
		{perSecond("req/s"), 4517.6, 4518, "4518 req/s"},
		{ratioFormat(), 2.657, 2.66, "2.66"},
		{ratioFormat(), 0.6154, 0.62, "0.62"},
		{ratioFormat(), 2, 2, "2.00"},
	}
	for _, tt := range tests {
		s := tt.f.shown(tt.x)
		if s != tt.shown {
			t.Errorf("%+v shown(%v) = %v, want %v", tt.f, tt.x, s, tt.shown)
		}
		if got := tt.f.text(s); got != tt.text {
			t.Errorf("%+v text(%v) = %q, want %q", tt.f, s, got, tt.text)
		}
	}
}

// figureNamed returns the figure called name.
func figureNamed(t *testing.T, name string) figure {
	t.Helper()
	for _, f := range figures() {
		if f.name == name {
			return f
		}
	}
	t.Fatalf("no figure %q", name)
	return figure{}
}

func TestGoal(t *testing.T) {
	const (
		ctx      = "ctx call, pack → host → plugin"
		through  = "throughput, 16 concurrent callers"
		start    = "host start to ready, four families and the demo pack"
		memory   = "idle memory, host"
		op       = "operator call, host → plugin"
		pg       = "postgres: promptLibrary get"
		pgAgents = "postgres: agent message round trip"
		serve    = "POST :execute, one request at a time"
		nodeRun  = "node run with one ctx call on a direct channel"
		wasm     = "node run with one ctx call, WASM pack (WAT)"
	)
	tests := []struct {
		name   string
		figure string
		in     string // BenchmarkX line of one run
		goal   string
		met    string
	}{
		{"ratio under the goal", ctx, "BenchmarkCtxCall 1 1 ns/op 200000 host-ns/call 100000 direct-ns/call 2.0 ratio", "≤ 2.3", "yes"},
		{"ratio at the goal, as shown", ctx, "BenchmarkCtxCall 1 1 ns/op 230000 host-ns/call 100000 direct-ns/call 2.304 ratio", "≤ 2.3", "yes"},
		{"ratio over the goal", ctx, "BenchmarkCtxCall 1 1 ns/op 260000 host-ns/call 100000 direct-ns/call 2.6 ratio", "≤ 2.3", "no"},
		{"ratio metric missing", ctx, "BenchmarkCtxCall 1 1 ns/op 260000 host-ns/call 100000 direct-ns/call", "≤ 2.3", "—"},
		{"higher is better, met", through, "BenchmarkCtxCallConcurrent 1 1 ns/op 600 host-calls/s 1000 direct-calls/s 0.6 ratio", "≥ 0.5", "yes"},
		{"higher is better, missed", through, "BenchmarkCtxCallConcurrent 1 1 ns/op 400 host-calls/s 1000 direct-calls/s 0.4 ratio", "≥ 0.5", "no"},
		{"start-up ratio under the goal", start, "BenchmarkStartToReady 1 1 ns/op 125 ms/ready 100 floor-ms/start", "≤ 1.25", "yes"},
		{"start-up ratio over the goal despite a small value", start, "BenchmarkStartToReady 1 1 ns/op 38 ms/ready 30 floor-ms/start", "≤ 1.25", "no"},
		{"value goal, missed", memory, "BenchmarkIdleMemory 1 1 ns/op 40.2 host-MB", "≤ 40 MB", "no"},
		{"value goal, not measured", memory, "BenchmarkOther 1 1 ns/op", "≤ 40 MB", "—"},
		{"postgres within 1.2 × embedded", pg, "BenchmarkPostgresPromptGet 1 1 ns/op 1200 postgres-ns/call 1000 embedded-ns/call 1.2 pg/embedded", "≤ 1.2", "yes"},
		{"postgres over 1.2 × embedded", pg, "BenchmarkPostgresPromptGet 1 1 ns/op 1210 postgres-ns/call 1000 embedded-ns/call 1.21 pg/embedded", "≤ 1.2", "no"},
		{"postgres agent messages within 1.5 × embedded", pgAgents, "BenchmarkPostgresAgentMessage 1 1 ns/op 1400 postgres-ns/call 1000 embedded-ns/call 1.4 pg/embedded", "≤ 1.5", "yes"},
		{"POST :execute over 1.3 × the run in process", serve, "BenchmarkServeExecuteVsRun 1 1 ns/op 1310 serve-ns/run 1000 run-ns/run 1.31 serve/run", "≤ 1.3", "no"},
		{"node run on a direct channel under 2.5 × direct", nodeRun, "BenchmarkNodeRunDirect 1 1 ns/op 490 host-ns/call 200 direct-ns/call 2.45 ratio", "≤ 2.5", "yes"},
		{"WASM node run at 1.5 × direct", wasm, "BenchmarkNodeRunWasm 1 1 ns/op 300 host-ns/call 200 direct-ns/call 1.5 ratio", "≤ 1.5", "yes"},
		{"WASM node run just over 1.5 × direct", wasm, "BenchmarkNodeRunWasm 1 1 ns/op 302 host-ns/call 200 direct-ns/call 1.51 ratio", "≤ 1.5", "no"},
		{"no goal", op, "BenchmarkOperatorCall 1 1 ns/op 2 host-ns/call 1 direct-ns/call 2 ratio", "—", "—"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := figureNamed(t, tt.figure)
			w := measure(mustParse(t, tt.in+"\n"), []figure{f})[0]
			if got := w.goalCell(); got != tt.goal {
				t.Errorf("goal = %q, want %q", got, tt.goal)
			}
			if got := w.metCell(); got != tt.met {
				t.Errorf("met = %q, want %q", got, tt.met)
			}
		})
	}
}

func TestMeasureCells(t *testing.T) {
	in := "BenchmarkStartToReady 1 1 ns/op 168.4 ms/ready 84.1 floor-ms/start 24.61 plugin-ms/start\n" +
		"BenchmarkCtxCall 1 1 ns/op 522506 host-ns/call 196672 direct-ns/call\n"
	r := mustParse(t, in)
	rows := measure(r, figures())
	cells := map[string][]string{}
	for _, w := range rows {
		cells[w.fig.name] = []string{w.valueCell(), w.baselineCell(), w.ratioCell()}
	}
	for name, want := range map[string][]string{
		// No ratio metric: value/baseline from the unrounded medians.
		"host start to ready, four families and the demo pack": {"168.4 ms", "start floor 84.1 ms", "2.00"},
		// A ratio metric the input lacks is not computed in its place.
		"ctx call, pack → host → plugin":            {"522.5 µs", "direct Invoke 196.7 µs", "—"},
		"ctx call against a unix-socket round trip": {"522.5 µs", "—", "—"},
		"idle memory, host":                         {"not measured", "—", "—"},
		"promptLibrary get":                         {"not measured", "—", "—"},
	} {
		if got := cells[name]; !slices.Equal(got, want) {
			t.Errorf("%s: cells %q, want %q", name, got, want)
		}
	}
}

func TestRegressed(t *testing.T) {
	tests := []struct {
		name     string
		now, was float64
		tol      float64
		better   direction
		want     bool
	}{
		{"lower: same", 2.66, 2.66, 0.2, lowerIsBetter, false},
		{"lower: better", 1.5, 2.66, 0.2, lowerIsBetter, false},
		{"lower: exactly at tolerance", 3.0, 2.5, 0.2, lowerIsBetter, false},
		{"lower: exactly at tolerance, value", 120, 100, 0.2, lowerIsBetter, false},
		{"lower: just over tolerance", 3.01, 2.5, 0.2, lowerIsBetter, true},
		{"lower: 25% worse", 125, 100, 0.2, lowerIsBetter, true},
		{"lower: zero tolerance, worse", 2.67, 2.66, 0, lowerIsBetter, true},
		{"higher: same", 0.62, 0.62, 0.2, higherIsBetter, false},
		{"higher: better", 0.9, 0.62, 0.2, higherIsBetter, false},
		{"higher: exactly at tolerance", 0.4, 0.5, 0.2, higherIsBetter, false},
		{"higher: just over tolerance", 0.39, 0.5, 0.2, higherIsBetter, true},
		{"higher: 30% worse", 3163, 4518, 0.2, higherIsBetter, true},
		{"higher: lower is not better", 9000, 4518, 0.2, higherIsBetter, false},
		{"lower: more is not better", 9000, 4518, 0.2, lowerIsBetter, true},
	}
	for _, tt := range tests {
		if got := regressed(tt.now, tt.was, tt.tol, tt.better); got != tt.want {
			t.Errorf("%s: regressed(%v, %v, %v) = %v, want %v", tt.name, tt.now, tt.was, tt.tol, got, tt.want)
		}
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name        string
		old, new    string
		tol         float64
		regressions []string // substrings, one per regression, in order
		notes       []string // substrings, one per note, in order
		checked     int
	}{
		{
			name: "identical", old: oneRun, new: oneRun, tol: 0.2, checked: 43,
		},
		{
			name: "identical, zero tolerance", old: oneRun, new: oneRun, tol: 0, checked: 43,
		},
		{
			name: "lower is better, ratio 28% worse",
			old:  oneRun, new: edit(t, oneRun, "2.657 ratio", "3.4 ratio"), tol: 0.2, checked: 43,
			regressions: []string{"ctx call, pack → host → plugin: ratio 3.40, committed 2.66 (+27.8%, lower is better, tolerance 20%)"},
		},
		{
			name: "lower is better, value only: a slower machine is not a regression of a ratio",
			old:  oneRun, new: edit(t, oneRun, "522506 host-ns/call", "922506 host-ns/call"), tol: 0.2, checked: 43,
		},
		{
			name: "lower is better, value guarded",
			old:  oneRun, new: edit(t, oneRun, "287.4 p50-µs", "400 p50-µs"), tol: 0.2, checked: 43,
			regressions: []string{"promptLibrary get: value 400.0 µs, committed 287.4 µs (+39.2%, lower is better, tolerance 20%)"},
		},
		{
			name: "higher is better, 30% fewer requests",
			old:  oneRun, new: edit(t, oneRun, "4518 req/s", "3163 req/s"), tol: 0.2, checked: 43,
			regressions: []string{"POST :execute (8 workers, load driver): value 3163 req/s, committed 4518 req/s (-30.0%, higher is better, tolerance 20%)"},
		},
		{
			name: "higher is better, more is fine",
			old:  oneRun, new: edit(t, oneRun, "4518 req/s", "9000 req/s"), tol: 0.2, checked: 43,
		},
		{
			name: "computed ratio guarded",
			old:  oneRun, new: edit(t, oneRun, "84.10 floor-ms/start", "42.05 floor-ms/start"), tol: 0.2, checked: 43,
			regressions: []string{"host start to ready, four families and the demo pack: ratio 4.00, committed 2.00"},
		},
		{
			name: "exactly at the tolerance",
			old:  edit(t, oneRun, "2.657 ratio", "2.5 ratio"), new: edit(t, oneRun, "2.657 ratio", "3.0 ratio"), tol: 0.2, checked: 43,
		},
		{
			name: "within the tolerance, several figures",
			old:  oneRun,
			new:  edit(t, oneRun, "2.657 ratio", "3.15 ratio", "4518 req/s", "3700 req/s", "31.42 host-MB", "37.5 host-MB"),
			tol:  0.2, checked: 43,
		},
		{
			name: "a larger tolerance lets a regression through",
			old:  oneRun, new: edit(t, oneRun, "2.657 ratio", "3.4 ratio"), tol: 0.5, checked: 43,
		},
		{
			name: "benchmark filtered out now",
			old:  oneRun, new: dropLine(oneRun, "BenchmarkIdleMemory"), tol: 0.2, checked: 41,
			notes: []string{
				"idle memory, host: in the committed table, not measured now",
				"idle memory, largest plugin: in the committed table, not measured now",
			},
		},
		{
			name: "benchmark new since the committed table",
			old:  dropLine(oneRun, "BenchmarkPromptGet"), new: oneRun, tol: 0.2, checked: 42,
			notes: []string{"promptLibrary get: measured now, not measured in the committed table"},
		},
		{
			name: "notes and a regression together",
			old:  dropLine(oneRun, "BenchmarkPromptGet"),
			new:  dropLine(edit(t, oneRun, "0.6154 ratio", "0.31 ratio"), "BenchmarkServeExecute-"),
			tol:  0.2, checked: 41,
			regressions: []string{"throughput, 16 concurrent callers: ratio 0.31, committed 0.62 (-50.0%, higher is better"},
			notes: []string{
				"POST :execute (8 workers, load driver): in the committed table, not measured now",
				"promptLibrary get: measured now, not measured in the committed table",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, err := parseTable(table(t, tt.old))
			if err != nil {
				t.Fatal(err)
			}
			c := compareRows(measure(mustParse(t, tt.new), figures()), old, tt.tol)
			checkAll(t, "regressions", c.regressions, tt.regressions)
			checkAll(t, "notes", c.notes, tt.notes)
			if c.checked != tt.checked {
				t.Errorf("checked %d figures, want %d", c.checked, tt.checked)
			}
		})
	}
}

// checkAll fails unless got has one message per want, each containing it.
func checkAll(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %q, want %d matching %q", what, got, len(want), want)
		return
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("%s[%d] = %q, want it to contain %q", what, i, got[i], want[i])
		}
	}
}

func TestCompareTableEdits(t *testing.T) {
	committed := table(t, oneRun)
	tests := []struct {
		name  string
		table string
		notes []string
	}{
		{
			name:  "a row no longer a figure",
			table: committed + "| retired figure | 1.0 µs | — | — | — | — |\n",
			notes: []string{"retired figure: in the committed table, no longer a figure"},
		},
		{
			name:  "a row missing from the committed table",
			table: dropLine(committed, "| idle memory, host "),
			notes: []string{"idle memory, host: measured now, not in the committed table"},
		},
		{
			name:  "hand-edited spacing and alignment",
			table: strings.ReplaceAll(strings.ReplaceAll(committed, "  ", " "), "| --- ", "|:---:"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, err := parseTable(tt.table)
			if err != nil {
				t.Fatal(err)
			}
			c := compareRows(measure(mustParse(t, oneRun), figures()), old, 0)
			checkAll(t, "regressions", c.regressions, nil)
			checkAll(t, "notes", c.notes, tt.notes)
		})
	}
}

// TestRoundTrip checks that every number the table shows parses back to
// the number it was shown from, for every figure, so a re-run on the same
// input never regresses even with no tolerance.
func TestRoundTrip(t *testing.T) {
	for _, in := range []string{oneRun, mustRead(t, "testdata/bench.txt")} {
		rows := measure(mustParse(t, in), figures())
		old, err := parseTable(table(t, in))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range rows {
			now, ok := w.guarded()
			if !ok {
				t.Errorf("%s: not measured", w.fig.name)
				continue
			}
			was, ok := cellNumber(old[w.fig.name][w.fig.guardedColumn()])
			if !ok || was != now {
				t.Errorf("%s: %s column parses to %v, %v; want %v", w.fig.name, w.fig.guardedColumn(), was, ok, now)
			}
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseTableErrors(t *testing.T) {
	for _, tt := range []struct{ name, block, want string }{
		{"no table", "\nMeasured on linux/amd64\n\n", "no table"},
		{"no Figure column", "| Name | Value |\n| --- | --- |\n| a | 1 |\n", "no Figure column"},
	} {
		if _, err := parseTable(tt.block); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
}

func TestSplice(t *testing.T) {
	const block = "Measured on x\n\n| Figure |\n| ------ |\n| a      |\n"
	const section = beginMarker + "\n\n" + block + "\n" + endMarker
	tests := []struct {
		name, doc, want string
	}{
		{"empty file", "", section + "\n"},
		{"markers absent", "# Benchmarks\n\nHow to run them.\n", "# Benchmarks\n\nHow to run them.\n\n" + section + "\n"},
		{"markers absent, no final newline", "# Benchmarks", "# Benchmarks\n\n" + section + "\n"},
		{
			"text around the markers kept byte for byte",
			"# Benchmarks\r\n\n  intro  \n" + beginMarker + "\nold table\n| Figure |\n" + endMarker + "\n\ntrailing  text\n\n\n",
			"# Benchmarks\r\n\n  intro  \n" + section + "\n\ntrailing  text\n\n\n",
		},
		{"markers inline", "a " + beginMarker + " old " + endMarker + " b", "a " + section + " b"},
		{"already current", "intro\n" + section + "\nend\n", "intro\n" + section + "\nend\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := splice(tt.doc, block)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("splice =\n%q\nwant\n%q", got, tt.want)
			}
			inner, err := extract(got)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(inner) != strings.TrimSpace(block) {
				t.Errorf("extract after splice = %q, want %q", inner, block)
			}
		})
	}
}

func TestMarkerErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"end without begin", "x\n" + endMarker + "\n", "without " + beginMarker},
		{"begin without end", beginMarker + "\n", "without " + endMarker},
		{"end before begin", endMarker + "\n" + beginMarker + "\n", "before"},
		{"two tables", beginMarker + endMarker + beginMarker + endMarker, "more than one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := splice(tt.doc, "t\n"); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("splice err = %v, want it to contain %q", err, tt.want)
			}
			if _, err := extract(tt.doc); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("extract err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, err := extract("# Benchmarks\n"); err == nil || !strings.Contains(err.Error(), "no "+beginMarker) {
		t.Errorf("extract without markers: err = %v", err)
	}
}

// runCmd runs the command with stdin and returns its status, stdout and
// stderr.
func runCmd(stdin string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRunUpdateThenCompare(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "bench.txt")
	writeFile(t, input, mustRead(t, "testdata/bench.txt"))
	doc := filepath.Join(dir, "BENCHMARKS.md")
	writeFile(t, doc, "# Performance\n\nRun make bench.\n")

	code, out, errOut := runCmd("", "-update", doc, input)
	if code != exitOK {
		t.Fatalf("update: status %d, stderr %s", code, errOut)
	}
	if want := mustRead(t, "testdata/bench.md"); out != want {
		t.Errorf("stdout =\n%s\nwant\n%s", out, want)
	}
	got := mustRead(t, doc)
	if !strings.HasPrefix(got, "# Performance\n\nRun make bench.\n\n"+beginMarker+"\n") || !strings.Contains(got, out) {
		t.Errorf("BENCHMARKS.md =\n%s", got)
	}

	for _, tol := range []string{"0.2", "0"} {
		code, _, errOut = runCmd("", "-compare", doc, "-tolerance", tol, input)
		if code != exitOK || !strings.Contains(errOut, "43 figures within tolerance") {
			t.Errorf("compare at tolerance %s: status %d, stderr %s", tol, code, errOut)
		}
	}

	// Updating again from the same input changes nothing.
	if code, _, errOut := runCmd("", "-update", doc, input); code != exitOK {
		t.Fatalf("second update: status %d, stderr %s", code, errOut)
	}
	if again := mustRead(t, doc); again != got {
		t.Errorf("second update changed the file:\n%s", again)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("files left in %s: %v", dir, entries)
	}
}

func TestRunCompareFailsThenUpdates(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "BENCHMARKS.md")
	writeFile(t, doc, "intro\n"+beginMarker+"\n\n"+table(t, oneRun)+"\n"+endMarker+"\noutro\n")
	worse := edit(t, oneRun, "2.657 ratio", "3.4 ratio")

	code, _, errOut := runCmd(worse, "-compare", doc, "-update", doc, "-")
	if code != exitRegression {
		t.Errorf("status %d, want %d; stderr %s", code, exitRegression, errOut)
	}
	for _, want := range []string{
		"benchreport: regression: ctx call, pack → host → plugin: ratio 3.40, committed 2.66",
		"1 of 43 figures regressed against " + doc,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q lacks %q", errOut, want)
		}
	}
	want := "intro\n" + beginMarker + "\n\n" + table(t, worse) + "\n" + endMarker + "\noutro\n"
	if got := mustRead(t, doc); got != want {
		t.Errorf("after update =\n%s\nwant\n%s", got, want)
	}
	// The accepted regression is now the committed figure.
	if code, _, errOut := runCmd(worse, "-compare", doc); code != exitOK {
		t.Errorf("compare after accepting: status %d, stderr %s", code, errOut)
	}
}

func TestRunNotes(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "BENCHMARKS.md")
	writeFile(t, doc, beginMarker+"\n"+table(t, oneRun)+endMarker+"\n")
	code, out, errOut := runCmd(dropLine(oneRun, "BenchmarkIdleMemory"), "-compare", doc)
	if code != exitOK {
		t.Errorf("status %d, stderr %s", code, errOut)
	}
	if !strings.Contains(errOut, "benchreport: note: idle memory, host: in the committed table, not measured now") {
		t.Errorf("stderr %q lacks the note", errOut)
	}
	if !strings.Contains(out, "| idle memory, host ") || !strings.Contains(out, "not measured") {
		t.Errorf("stdout lacks the row not measured:\n%s", out)
	}
}

func TestRunCreatesFile(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	code, out, errOut := runCmd(oneRun, "-update", doc)
	if code != exitOK {
		t.Fatalf("status %d, stderr %s", code, errOut)
	}
	if got, want := mustRead(t, doc), beginMarker+"\n\n"+out+"\n"+endMarker+"\n"; got != want {
		t.Errorf("created file =\n%s\nwant\n%s", got, want)
	}
	fi, err := os.Stat(doc)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
}

func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "bench.txt")
	writeFile(t, input, oneRun)
	noMarkers := filepath.Join(dir, "plain.md")
	writeFile(t, noMarkers, "# Benchmarks\n")
	missing := filepath.Join(dir, "missing.md")
	bad := filepath.Join(dir, "bad.md")
	writeFile(t, bad, endMarker+"\n"+beginMarker+"\n")

	tests := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"two inputs", "", []string{input, input}, "usage: benchreport"},
		{"unknown flag", "", []string{"-x", input}, "flag provided but not defined"},
		{"negative tolerance", "", []string{"-tolerance", "-0.1", input}, "-tolerance -0.1"},
		{"tolerance not a number", "", []string{"-tolerance", "abc", input}, "invalid value"},
		{"missing input", "", []string{filepath.Join(dir, "none.txt")}, "none.txt"},
		{"no benchmark lines", "PASS\nok  \tx\t0.1s\n", nil, "stdin: no benchmark results"},
		{"compare: missing file", oneRun, []string{"-compare", missing}, missing},
		{"compare: no markers", oneRun, []string{"-compare", noMarkers}, noMarkers + ": no " + beginMarker},
		{"update: markers out of order", oneRun, []string{"-update", bad}, bad + ": " + endMarker + " before"},
		{"update: directory missing", oneRun, []string{"-update", filepath.Join(dir, "no", "such", "dir.md")}, "dir.md"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runCmd(tt.stdin, tt.args...)
			if code != exitError {
				t.Errorf("status %d, want %d", code, exitError)
			}
			if !strings.Contains(errOut, tt.want) {
				t.Errorf("stderr %q lacks %q", errOut, tt.want)
			}
		})
	}
	// A failed compare writes nothing, even with -update.
	code, _, _ := runCmd(oneRun, "-compare", noMarkers, "-update", noMarkers)
	if code != exitError || mustRead(t, noMarkers) != "# Benchmarks\n" {
		t.Errorf("status %d, file %q", code, mustRead(t, noMarkers))
	}
}

func TestRunStdin(t *testing.T) {
	for _, args := range [][]string{nil, {"-"}} {
		code, out, errOut := runCmd(oneRun, args...)
		if code != exitOK || !strings.HasPrefix(out, "Measured on linux/amd64, AMD EPYC 7B13, GOMAXPROCS 2\n\n| Figure ") {
			t.Errorf("args %q: status %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

// TestFigures checks the figure list is one that the table and -compare
// can carry.
func TestFigures(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range figures() {
		if f.name == "" || seen[f.name] {
			t.Errorf("figure name %q empty or repeated: -compare matches rows by it", f.name)
		}
		seen[f.name] = true
		for _, s := range []string{f.name, f.baselineLabel, f.show.unit} {
			if strings.Contains(s, "|") {
				t.Errorf("%s: %q would split a table cell", f.name, s)
			}
		}
		if !strings.HasPrefix(f.bench, "Benchmark") || f.value == "" {
			t.Errorf("%s: benchmark %q, value metric %q", f.name, f.bench, f.value)
		}
		if (f.baseline == "") != (f.baselineLabel == "") {
			t.Errorf("%s: baseline %q with label %q", f.name, f.baseline, f.baselineLabel)
		}
		if f.ratioMetric != "" && f.baseline == "" {
			t.Errorf("%s: ratio %q without a baseline", f.name, f.ratioMetric)
		}
		if f.goal != nil && f.goal.onValue && !f.hasRatio() {
			t.Errorf("%s: onValue is implied without a ratio", f.name)
		}
	}
	if len(seen) != 43 {
		t.Errorf("%d figures, want 43", len(seen))
	}
}
