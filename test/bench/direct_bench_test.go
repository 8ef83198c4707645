package bench

import (
	"context"
	"testing"
)

// BenchmarkCtxCallDirect is BenchmarkCtxCall on a direct channel: the
// probe pack's b.N ctx calls go from the pack to testcap under the
// host's grant, one hop, against b.N raw Invokes on the plugin and b.N
// round trips of the payload over a bare unix socket.
func BenchmarkCtxCallDirect(b *testing.B) {
	ctx := context.Background()
	sock := startSocketPeer(b)
	c := startDirect(b)
	h := startHost(b, echoConfigDirect(b))
	took := timeCalls(b, sock.roundTrips,
		func(n int) error { return directCalls(ctx, c, n) },
		func(n int) error { return runLoop(ctx, h, n) })
	reportPair(b, took[1], took[2], "direct-ns/call")
	floor := float64(took[0].Nanoseconds()) / float64(b.N)
	b.ReportMetric(floor, "socket-ns/rtt")
	b.ReportMetric(float64(took[2].Nanoseconds())/float64(b.N)/floor, "floor-ratio")
}

// BenchmarkCtxCallConcurrentDirect is BenchmarkCtxCallConcurrent on
// direct channels: 16 probe.loop runs at once, each calling testcap on
// its own grant over the pack's one connection to the channel, against
// 16 goroutines calling Invoke on one connection.
func BenchmarkCtxCallConcurrentDirect(b *testing.B) {
	ctx := context.Background()
	c := startDirect(b)
	h := startHost(b, echoConfigDirect(b))
	took := timeCalls(b,
		func(n int) error { return inParallel(n, func(n int) error { return directCalls(ctx, c, n) }) },
		func(n int) error {
			return inParallel(n, func(n int) error {
				if n == 0 {
					return nil
				}
				return runLoop(ctx, h, n)
			})
		})
	direct := float64(b.N) / took[0].Seconds()
	viaHost := float64(b.N) / took[1].Seconds()
	b.ReportMetric(direct, "direct-calls/s")
	b.ReportMetric(viaHost, "host-calls/s")
	b.ReportMetric(viaHost/direct, "ratio")
}
