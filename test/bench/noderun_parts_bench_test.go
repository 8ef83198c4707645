package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/wophost/wophost/core/host"
)

// BenchmarkNodeRunParts splits BenchmarkNodeRun's node run into parts by
// subtraction: every path below runs b.N times in one function (see
// timeCalls), so that their differences are taken under the same load.
//
//   - direct-ns/call: a raw Invoke on testcap, the table's baseline;
//   - grpc-ns/rtt: a bare grpc-go round trip, the least the host's
//     Execute to the pack could cost on gRPC;
//   - operator-ns/call: the routed call without a pack (h.Call);
//   - nocall-ns/run: a run of probe.loop with n = 0, the run's set-up,
//     Execute, the pack's dispatch and the run's end without a call;
//   - loop1-ns/run: probe.loop with n = 1, the same node as nocall with
//     one routed call;
//   - call-ns/run: probe.call, BenchmarkNodeRun's run (routed call);
//   - loop-ns/call: one routed ctx call inside a run, the run's own cost
//     spread over b.N calls (probe.loop with n = b.N);
//   - record-ns/run: probe.call with a run record written (Record);
//   - direct-nocall-ns/run, direct-call-ns/run and direct-loop-ns/call:
//     nocall, call and loop on a second host whose call goes on the
//     node's direct channel (its runs are offered the channel).
//
// It also reports each process's CPU per run for the nocall, call and
// loop1 paths and the direct host's nocall path (nocall-, call-, loop1-
// and direct-nocall-<process>-cpu-µs/call), and per call for the loop
// path (loop-<process>-cpu-µs/call), which sets a run's first call
// against a call in a running node, process by process. The host's
// figure is this process's, so it counts both hosts and whatever ran in
// the background.
func BenchmarkNodeRunParts(b *testing.B) {
	ctx := context.Background()
	c := startDirect(b)
	peer := startGRPCPeer(b)
	cfg := echoConfig(b)
	h := startHost(b, cfg)
	hd := startHost(b, echoConfigDirect(b))
	_, noCallMeter := echoMeters(b, c, h)
	_, callMeter := echoMeters(b, c, h)
	_, directNoCallMeter := echoMeters(b, c, hd)
	_, loop1Meter := echoMeters(b, c, h)
	_, loopMeter := echoMeters(b, c, h)
	// writeConfig keeps the host's state beside its config.
	recordDir := filepath.Join(filepath.Dir(cfg), "state", host.RunsDir)
	record := func(n int) error {
		for range n {
			if _, err := h.Run(ctx, "probe.call", probeCallInput(), host.RunOptions{Record: true}); err != nil {
				return err
			}
		}
		return nil
	}
	paths := []struct {
		unit string
		run  func(n int) error
	}{
		{"direct-ns/call", func(n int) error { return directCalls(ctx, c, n) }},
		{"grpc-ns/rtt", peer.roundTrips},
		{"operator-ns/call", func(n int) error { return operatorCalls(ctx, h, n) }},
		{"nocall-ns/run", noCallMeter.wrap(b, func(n int) error {
			for range n {
				if err := runLoop(ctx, h, 0); err != nil {
					return err
				}
			}
			return nil
		})},
		{"loop1-ns/run", loop1Meter.wrap(b, func(n int) error {
			for range n {
				if err := runLoop(ctx, h, 1); err != nil {
					return err
				}
			}
			return nil
		})},
		{"call-ns/run", callMeter.wrap(b, nodeRuns(ctx, h, "probe.call", probeCallInput(), nil))},
		{"loop-ns/call", loopMeter.wrap(b, func(n int) error { return runLoop(ctx, h, n) })},
		{"record-ns/run", record},
		{"direct-nocall-ns/run", directNoCallMeter.wrap(b, func(n int) error {
			for range n {
				if err := runLoop(ctx, hd, 0); err != nil {
					return err
				}
			}
			return nil
		})},
		{"direct-call-ns/run", nodeRuns(ctx, hd, "probe.call", probeCallInput(), nil)},
		{"direct-loop-ns/call", func(n int) error { return runLoop(ctx, hd, n) }},
	}
	runs := make([]func(n int) error, len(paths))
	for i, p := range paths {
		runs[i] = p.run
	}
	took := timeCalls(b, runs...)
	for i, p := range paths {
		b.ReportMetric(float64(took[i].Nanoseconds())/float64(b.N), p.unit)
	}
	noCallMeter.report(b, "nocall-", b.N)
	callMeter.report(b, "call-", b.N)
	loop1Meter.report(b, "loop1-", b.N)
	loopMeter.report(b, "loop-", b.N)
	directNoCallMeter.report(b, "direct-nocall-", b.N)
	// The records must exist, or record-ns/run measured something else.
	if n := countRecords(b, recordDir); n != b.N+warmCalls {
		b.Fatalf("%d run records in %s, want %d", n, recordDir, b.N+warmCalls)
	}
}

// countRecords counts the run records (*.json) in dir.
func countRecords(tb testing.TB, dir string) int {
	tb.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(fmt.Errorf("read the run records: %w", err))
	}
	n := 0
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".json" {
			n++
		}
	}
	return n
}
