package main

import "strconv"

// direction says which way a figure improves.
type direction int

const (
	lowerIsBetter direction = iota
	higherIsBetter
)

// format is how a metric is shown: times scale, with decimals digits
// after the point, then unit.
type format struct {
	scale    float64
	decimals int
	unit     string
}

// shown converts a metric to the number the table shows: scaled and
// rounded as printed. Goals and the regression guard use it, so a figure
// is judged by what the table says, and a committed table parses back to
// exactly the numbers it was written from.
func (f format) shown(x float64) float64 {
	s := strconv.FormatFloat(x*f.scale, 'f', f.decimals, 64)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// FormatFloat's output always parses; keep the unrounded number
		// rather than fail.
		return x * f.scale
	}
	return v
}

// text prints a number returned by shown, with its unit, e.g. "522.5 µs".
func (f format) text(shown float64) string {
	s := strconv.FormatFloat(shown, 'f', f.decimals, 64)
	if f.unit == "" {
		return s
	}
	return s + " " + f.unit
}

// The formats of the figures: ns metrics as µs, ms, MB, KiB and rates as
// they come, ratios with two decimals.

func nanosAsMicros() format { return format{scale: 1e-3, decimals: 1, unit: "µs"} }
func nanosAsMillis() format { return format{scale: 1e-6, decimals: 2, unit: "ms"} }
func micros() format        { return format{scale: 1, decimals: 1, unit: "µs"} }
func millis() format        { return format{scale: 1, decimals: 1, unit: "ms"} }
func megabytes() format     { return format{scale: 1, decimals: 1, unit: "MB"} }
func kibibytes() format     { return format{scale: 1, decimals: 0, unit: "KiB"} }
func ratioFormat() format   { return format{scale: 1, decimals: 2} }

func perSecond(unit string) format { return format{scale: 1, decimals: 0, unit: unit} }

// goal is the target a figure is held to in the Met column.
type goal struct {
	atMost bool    // ≤ limit when true, ≥ limit otherwise
	limit  float64 // in the units the table shows
	// onValue applies the goal to the value even when the figure has a
	// ratio, for a figure whose budget is absolute.
	onValue bool
}

// figure is one row of the table: where its numbers come from, how they
// are shown, the goal they are held to and which way is better.
type figure struct {
	name  string // row label; -compare matches committed rows by it
	bench string // benchmark name as go test prints it, without -GOMAXPROCS
	value string // metric shown in the Value column
	show  format // how value and baseline are shown

	baseline      string // metric the value is measured against, if any
	baselineLabel string // what the baseline is, in the Baseline column
	// ratioMetric is the benchmark's own ratio metric. Without one, a
	// figure with a baseline shows value/baseline.
	ratioMetric string

	goal   *goal
	better direction
}

// hasRatio reports whether the figure shows a ratio; the regression guard
// then compares the ratio, which cancels out the speed of the machine.
func (f figure) hasRatio() bool { return f.ratioMetric != "" || f.baseline != "" }

// ctxVsDirect is a ctx call of bench against a direct Invoke measured in
// the same run.
func ctxVsDirect(name, bench string, g *goal) figure {
	return figure{
		name: name, bench: bench, value: "host-ns/call", show: nanosAsMicros(),
		baseline: "direct-ns/call", baselineLabel: "direct Invoke", ratioMetric: "ratio", goal: g,
	}
}

// ctxVsSocket is a ctx call of bench against a bare unix-socket round trip
// between two processes, the physical floor.
func ctxVsSocket(name, bench string) figure {
	return figure{
		name: name, bench: bench, value: "host-ns/call", show: nanosAsMicros(),
		baseline: "socket-ns/rtt", baselineLabel: "unix-socket round trip", ratioMetric: "floor-ratio",
		goal: &goal{atMost: true, limit: 10},
	}
}

// throughputVsDirect is the call rate of bench's concurrent callers
// through the host against the same callers on a direct Invoke, held to at
// least atLeast of it.
func throughputVsDirect(name, bench string, atLeast float64) figure {
	return figure{
		name: name, bench: bench, value: "host-calls/s", show: perSecond("calls/s"),
		baseline: "direct-calls/s", baselineLabel: "direct Invoke", ratioMetric: "ratio",
		goal: &goal{limit: atLeast}, better: higherIsBetter,
	}
}

// postgresVsEmbedded is the per-call time of bench's path on the postgres
// storage backend against the same path on the embedded backend, measured
// call by call in the same run; the goal is the same for every such path.
func postgresVsEmbedded(name, bench string, show format, limit float64) figure {
	return figure{
		name: name, bench: bench, value: "postgres-ns/call", show: show,
		baseline: "embedded-ns/call", baselineLabel: "embedded", ratioMetric: "pg/embedded",
		goal: &goal{atMost: true, limit: limit},
	}
}

// wasmInstanceSize is a size in KiB that BenchmarkWasmInstanceMemory
// reports as metric, with no baseline: a size does not depend on the
// machine's speed.
func wasmInstanceSize(name, metric string) figure {
	return figure{name: name, bench: "BenchmarkWasmInstanceMemory", value: metric, show: kibibytes()}
}

// figures lists the project's performance figures, one per table row, in
// table order.
func figures() []figure {
	return []figure{
		ctxVsDirect("ctx call, pack → host → plugin", "BenchmarkCtxCall", &goal{atMost: true, limit: 2.3}),
		ctxVsDirect("ctx call on a direct channel, pack → plugin", "BenchmarkCtxCallDirect", &goal{atMost: true, limit: 1.3}),
		ctxVsDirect("ctx call, pack → host → plugin, direct_channels = false", "BenchmarkCtxCallGRPC", nil),
		ctxVsSocket("ctx call against a unix-socket round trip", "BenchmarkCtxCall"),
		ctxVsSocket("ctx call on a direct channel against a unix-socket round trip", "BenchmarkCtxCallDirect"),
		ctxVsDirect("ctx call, host at gomaxprocs = 1", "BenchmarkCtxCallOneProc", &goal{atMost: true, limit: 2.3}),
		ctxVsSocket("ctx call against a unix-socket round trip, gomaxprocs = 1", "BenchmarkCtxCallOneProc"),
		ctxVsDirect("operator call, host → plugin", "BenchmarkOperatorCall", nil),
		ctxVsDirect("node run with one ctx call", "BenchmarkNodeRun", nil),
		// A capability's calls go on its direct channel unless its block
		// says otherwise: this is a node run under the default settings.
		ctxVsDirect("node run with one ctx call on a direct channel", "BenchmarkNodeRunDirect", &goal{atMost: true, limit: 2.5}),
		{
			// The same runs against a direct Invoke that, like the run's
			// call, finds the plugin asleep: what bounds the row above.
			name: "node run on a direct channel against an idle Invoke", bench: "BenchmarkNodeRunDirect",
			value: "host-ns/call", show: nanosAsMicros(),
			baseline: "idle-direct-ns/call", baselineLabel: "direct Invoke after 300 µs idle",
		},
		{
			name: "node run with one ctx call, contained pack", bench: "BenchmarkNodeRunContained",
			value: "contained-ns/run", show: nanosAsMicros(),
			baseline: "uncontained-ns/run", baselineLabel: "uncontained pack", ratioMetric: "contained/uncontained",
		},
		{
			name: "pack start to handshake, contained", bench: "BenchmarkPackStartContained",
			value: "contained-ms/start", show: millis(),
			baseline: "uncontained-ms/start", baselineLabel: "uncontained start", ratioMetric: "contained/uncontained",
		},
		ctxVsDirect("node run with one ctx call, WASM pack (WAT)", "BenchmarkNodeRunWasm", &goal{atMost: true, limit: 1.5}),
		ctxVsDirect("node run with one ctx call, WASM pack (Go SDK)", "BenchmarkNodeRunWasmGo", nil),
		{
			name: "node run with one ctx call, WASM pack (WAT) against a process pack", bench: "BenchmarkNodeRunWasmVsProcess",
			value: "wasm-ns/run", show: nanosAsMicros(),
			baseline: "process-ns/run", baselineLabel: "process pack", ratioMetric: "wasm/process",
		},
		{
			name: "WASM pack load, Go SDK module, empty compilation cache", bench: "BenchmarkWasmStart",
			value: "cold-ms/load", show: millis(),
		},
		{
			name: "WASM pack load, Go SDK module, compilation cache filled", bench: "BenchmarkWasmStart",
			value: "warm-ms/load", show: millis(),
			baseline: "cold-ms/load", baselineLabel: "empty cache", ratioMetric: "warm/cold",
		},
		wasmInstanceSize("linear memory of one instance, WASM pack (WAT)", "wat-linear-KiB/instance"),
		wasmInstanceSize("linear memory of one instance, WASM pack (Go SDK)", "go-linear-KiB/instance"),
		wasmInstanceSize("host heap per warm instance, WASM pack (Go SDK)", "go-heap-KiB/instance"),
		{
			name: "bare gRPC round trip (grpc-go, no TLS)", bench: "BenchmarkGRPCRoundTrip",
			value: "grpc-ns/rtt", show: nanosAsMicros(),
			baseline: "socket-ns/rtt", baselineLabel: "unix-socket round trip",
		},
		{
			name: "direct Invoke against a bare gRPC round trip", bench: "BenchmarkGRPCRoundTrip",
			value: "direct-ns/call", show: nanosAsMicros(),
			baseline: "grpc-ns/rtt", baselineLabel: "bare gRPC round trip",
		},
		throughputVsDirect("throughput, 16 concurrent callers", "BenchmarkCtxCallConcurrent", 0.5),
		throughputVsDirect("throughput, 16 concurrent callers on direct channels", "BenchmarkCtxCallConcurrentDirect", 0.8),
		throughputVsDirect("throughput, 16 concurrent callers, gomaxprocs = 1", "BenchmarkCtxCallConcurrentOneProc", 0.5),
		{
			name: "host start to ready, four families and the demo pack", bench: "BenchmarkStartToReady",
			value: "ms/ready", show: millis(),
			// The floor: the slowest of the six processes started alone, or
			// their summed CPU over GOMAXPROCS, whichever is larger.
			baseline: "floor-ms/start", baselineLabel: "start floor",
			goal: &goal{atMost: true, limit: 1.25},
		},
		{
			// The same six binaries exec'd with no host and nothing of the
			// protocol, all at once against one at a time: what starting
			// six processes side by side costs on the machine by itself,
			// the bound under the row above.
			name: "six bare process starts at once, no host", bench: "BenchmarkStartToReady",
			value: "bare-ms/start", show: millis(),
			baseline: "bare-floor-ms/start", baselineLabel: "their start floor",
		},
		{
			name: "idle memory, host", bench: "BenchmarkIdleMemory",
			value: "host-MB", show: megabytes(),
			goal: &goal{atMost: true, limit: 40},
		},
		{
			name: "idle memory, largest plugin", bench: "BenchmarkIdleMemory",
			value: "plugin-MB", show: megabytes(),
			goal: &goal{atMost: true, limit: 25},
		},
		{
			name: "MCP callTool through the host", bench: "BenchmarkMCPCallTool",
			value: "host-ns/call", show: nanosAsMicros(),
			baseline: "sdk-ns/call", baselineLabel: "Go SDK client direct", ratioMetric: "ratio",
			goal: &goal{atMost: true, limit: 1.2},
		},
		{
			name: "MCP callTool from a pack", bench: "BenchmarkMCPCallToolFromPack",
			value: "host-ns/call", show: nanosAsMicros(),
			baseline: "sdk-ns/call", baselineLabel: "Go SDK client direct", ratioMetric: "ratio",
		},
		{
			name: "POST :execute (8 workers, load driver)", bench: "BenchmarkServeExecute",
			value: "req/s", show: perSecond("req/s"),
			better: higherIsBetter,
		},
		{
			name: "POST :execute, one request at a time", bench: "BenchmarkServeExecuteVsRun",
			value: "serve-ns/run", show: nanosAsMicros(),
			baseline: "run-ns/run", baselineLabel: "the same run in process, recorded", ratioMetric: "serve/run",
			goal: &goal{atMost: true, limit: 1.3},
		},
		{
			name: "aiEnvelope generate from a node", bench: "BenchmarkAIEnvelopeGenerate",
			value: "node-p50-ns", show: nanosAsMicros(),
			baseline: "direct-p50-ns", baselineLabel: "direct Invoke", ratioMetric: "node/direct-p50",
		},
		{
			name: "promptLibrary get", bench: "BenchmarkPromptGet",
			value: "p50-µs", show: micros(),
		},
		{
			name: "ctx call in a recorded run (invocation log)", bench: "BenchmarkRunLogCtxCall",
			value: "logged-ns/call", show: nanosAsMicros(),
			baseline: "unlogged-ns/call", baselineLabel: "recorded run, no log (log_max_calls = 0)", ratioMetric: "logged/unlogged",
			goal: &goal{atMost: true, limit: 1.05},
		},
		{
			name: "ctx call in a recorded run on a direct channel", bench: "BenchmarkRunLogCtxCallDirect",
			value: "logged-ns/call", show: nanosAsMicros(),
			baseline: "unlogged-ns/call", baselineLabel: "recorded run, no log (log_max_calls = 0)", ratioMetric: "logged/unlogged",
		},
		{
			name: "replay of council.decide", bench: "BenchmarkReplayCouncil",
			value: "replay-ns", show: nanosAsMillis(),
			baseline: "run-ns", baselineLabel: "the original run", ratioMetric: "replay/run",
		},
		postgresVsEmbedded("postgres: aiEnvelope generate, new idempotency key", "BenchmarkPostgresAIEnvelopeGenerate", nanosAsMicros(), 1.2),
		postgresVsEmbedded("postgres: promptLibrary get", "BenchmarkPostgresPromptGet", nanosAsMicros(), 1.2),
		postgresVsEmbedded("postgres: agent message round trip", "BenchmarkPostgresAgentMessage", nanosAsMillis(), 1.5),
		postgresVsEmbedded("postgres: POST :execute with an Idempotency-Key", "BenchmarkPostgresServeExecute", nanosAsMillis(), 1.5),
	}
}
