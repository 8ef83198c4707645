package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/test/testbin"
)

// logChunk is how many ctx calls one probe.loop run makes in
// BenchmarkRunLogCtxCall: runs with and without a record alternate, so
// both see the same load, and each record's write (one per run) is spread
// over as many calls as a busy node makes.
const logChunk = 500

// maxCouncilRuns caps BenchmarkReplayCouncil, as maxStarts does for
// starts: each iteration is a whole agent vote and its replay.
const maxCouncilRuns = 50

// runLoopWith runs probe.loop with n calls under opts and checks its
// output.
func runLoopWith(ctx context.Context, h *host.Host, n int, opts host.RunOptions) error {
	res, err := h.Run(ctx, "probe.loop", loopInput(n), opts)
	if err != nil {
		return err
	}
	if want := fmt.Sprintf(`{"calls":%d}`, n); string(res.Output) != want {
		return fmt.Errorf("probe.loop output %s, want %s", res.Output, want)
	}
	if opts.Record && res.RecordPath == "" {
		return fmt.Errorf("probe.loop left no record: %s", res.RecordError)
	}
	return nil
}

// BenchmarkRunLogCtxCall measures what the invocation log costs a ctx
// call: b.N calls in recorded runs on a host that logs every call (the
// default) against b.N calls in recorded runs on a host that keeps no
// log (runs { log_max_calls = 0 }), through the same plugin and pack, so
// that both write a run record and only the log differs. Runs of
// logChunk calls alternate between the two hosts. The calls take the
// routed path (direct_channels = false); BenchmarkRunLogCtxCallDirect
// measures the same on a direct channel.
func BenchmarkRunLogCtxCall(b *testing.B) { runLogCtxCall(b, "  direct_channels = false\n") }

// BenchmarkRunLogCtxCallDirect is BenchmarkRunLogCtxCall on a direct
// channel, whose plugin keeps the run's calls and hands them to the host
// when the run ends.
func BenchmarkRunLogCtxCallDirect(b *testing.B) { runLogCtxCall(b, "") }

// runLogCtxCall runs BenchmarkRunLogCtxCall with hostBody in both hosts'
// host blocks.
func runLogCtxCall(b *testing.B, hostBody string) {
	ctx := context.Background()
	text := echoDeployment()
	plain := startHost(b, writeConfigIn(b, hostBody+"  runs {\n    log_max_calls = 0\n  }\n", text))
	logged := startHost(b, writeConfigIn(b, hostBody, text))
	opts := host.RunOptions{Record: true}
	hosts := []*host.Host{plain, logged}
	for _, h := range hosts {
		if err := runLoopWith(ctx, h, warmCalls, opts); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var took [2]time.Duration
	for done := 0; done < b.N; done += logChunk {
		n := min(logChunk, b.N-done)
		for i, h := range hosts {
			t0 := time.Now()
			err := runLoopWith(ctx, h, n, opts)
			took[i] += time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	p := float64(took[0].Nanoseconds()) / float64(b.N)
	l := float64(took[1].Nanoseconds()) / float64(b.N)
	b.ReportMetric(p, "unlogged-ns/call")
	b.ReportMetric(l, "logged-ns/call")
	b.ReportMetric(l/p, "logged/unlogged")
}

// councilConfig is the council demo: aiEnvelope on the local provider
// with the example rules, promptLibrary with its store in storeDir, the
// agent runtime and the council pack.
func councilConfig(tb testing.TB, storeDir, councilPack string) string {
	rules, err := filepath.Abs(testbin.SourceDir("examples/aienvelope/rules.json"))
	if err != nil {
		tb.Fatal(err)
	}
	return writeConfig(tb, fmt.Sprintf(`
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
capability "prompts" {
  plugin   = %q
  families = ["promptLibrary"]
  config { dir = %q }
}
capability "agents" { plugin = %q }
pack "community.wophost.council" { path = %q }
`, binary(tb, "./plugins/aienvelope"), rules, binary(tb, "./plugins/promptlib"), storeDir, binary(tb, "./plugins/agentrt"), councilPack))
}

// startCouncil publishes the council's prompts in a fresh store (before
// the pack loads: its agents resolve their pins then) and starts the
// council demo host.
func startCouncil(tb testing.TB) *host.Host {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	store := filepath.Join(tb.TempDir(), "prompts")
	pub := startHost(tb, writeConfig(tb, fmt.Sprintf(`
capability "prompts" {
  plugin   = %q
  families = ["promptLibrary"]
  config { dir = %q }
}
`, binary(tb, "./plugins/promptlib"), store)))
	for _, name := range []string{"council-reviewer", "council-maintainer"} {
		raw, err := os.ReadFile(testbin.SourceDir("examples/prompts/" + name + ".prompt"))
		if err != nil {
			tb.Fatal(err)
		}
		req, err := json.Marshal(promptlibrary.PublishRequest{Raw: raw})
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := pub.Call(ctx, promptlibrary.Family, promptlibrary.MethodPublish, req, host.RunOptions{}); err != nil {
			tb.Fatalf("publish %s: %v", name, err)
		}
	}
	pub.Close()
	pack, err := bin.cache.Pack("examples/packs/council")
	if err != nil {
		tb.Fatal(err)
	}
	return startHost(tb, councilConfig(tb, store, pack))
}

// councilInput is the example proposal.
func councilInput(tb testing.TB) json.RawMessage {
	in, err := os.ReadFile(testbin.SourceDir("examples/inputs/council-proposal.json"))
	if err != nil {
		tb.Fatal(err)
	}
	return in
}

// decideAndReplay runs council.decide with a record, then replays it
// from the record the host stored, as `host run --replay RUN_ID` does,
// and returns how long each took.
func decideAndReplay(ctx context.Context, h *host.Host, input json.RawMessage) (run, replay time.Duration, err error) {
	t0 := time.Now()
	orig, err := h.Run(ctx, "council.decide", input, host.RunOptions{Record: true})
	run = time.Since(t0)
	if err != nil {
		return 0, 0, fmt.Errorf("council.decide: %w", err)
	}
	t0 = time.Now()
	rec, err := h.RunRecord(ctx, orig.RunID)
	if err != nil {
		return 0, 0, err
	}
	res, err := h.Run(ctx, rec.TypeID, rec.Input, host.RunOptions{Record: true, Replay: rec})
	replay = time.Since(t0)
	if err != nil {
		return 0, 0, fmt.Errorf("replay of council.decide: %w", err)
	}
	if s := res.Replay; s == nil || s.Diverged != 0 || s.Served != 3 || string(res.Output) != string(orig.Output) {
		return 0, 0, fmt.Errorf("replay of council.decide: summary %+v, output %s, want %s", s, res.Output, orig.Output)
	}
	return run, replay, nil
}

// BenchmarkReplayCouncil measures a replay of council.decide (two
// spawns and a two-round vote of two agents on the local provider,
// answered from the run's log, the record read back included) against
// the original run, recorded. It runs min(b.N, maxCouncilRuns) pairs and
// overrides ns/op with the replay's time.
func BenchmarkReplayCouncil(b *testing.B) {
	ctx := context.Background()
	h := startCouncil(b)
	input := councilInput(b)
	if _, _, err := decideAndReplay(ctx, h, input); err != nil {
		b.Fatal(err)
	}
	n := min(b.N, maxCouncilRuns)
	b.ResetTimer()
	var run, replay time.Duration
	for range n {
		r, p, err := decideAndReplay(ctx, h, input)
		if err != nil {
			b.Fatal(err)
		}
		run += r
		replay += p
	}
	b.StopTimer()
	r := float64(run.Nanoseconds()) / float64(n)
	p := float64(replay.Nanoseconds()) / float64(n)
	b.ReportMetric(p, "ns/op")
	b.ReportMetric(r, "run-ns")
	b.ReportMetric(p, "replay-ns")
	b.ReportMetric(p/r, "replay/run")
}

// TestReplayBenchSetup runs both benchmarks' setup once, so `go test`
// catches a broken setup without running them.
func TestReplayBenchSetup(t *testing.T) {
	ctx := context.Background()
	h := startHost(t, echoConfig(t))
	if err := runLoopWith(ctx, h, 3, host.RunOptions{Record: true}); err != nil {
		t.Fatal(err)
	}
	c := startCouncil(t)
	if _, _, err := decideAndReplay(ctx, c, councilInput(t)); err != nil {
		t.Fatal(err)
	}
}
