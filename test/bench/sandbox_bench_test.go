package bench

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/core/sandbox"
)

// BenchmarkNodeRunContained compares b.N node runs of one ctx call
// (probe.call, on a direct channel, the default) on two hosts of the same
// config started side by side: one whose packs run uncontained (no
// launcher), one whose packs start contained through the host binary.
// A contained pack pays at start, not per call; the ratio says whether
// the filters cost anything on the way.
func BenchmarkNodeRunContained(b *testing.B) {
	ctx := context.Background()
	plain := startHostWithOptions(b, echoConfigDirect(b), host.Options{})
	contained := startHostWithOptions(b, echoConfigDirect(b), host.Options{Launcher: binary(b, "./cmd/wophost-launch")})
	requireContained(b, plain, false)
	requireContained(b, contained, true)
	in := probeCallInput()
	took := timeCalls(b, nodeRuns(ctx, plain, "probe.call", in, nil), nodeRuns(ctx, contained, "probe.call", in, nil))
	un := float64(took[0].Nanoseconds()) / float64(b.N)
	co := float64(took[1].Nanoseconds()) / float64(b.N)
	b.ReportMetric(un, "uncontained-ns/run")
	b.ReportMetric(co, "contained-ns/run")
	b.ReportMetric(co/un, "contained/uncontained")
}

// BenchmarkPackStartContained times min(b.N, maxStarts) starts of the
// probe pack until its handshake, uncontained and contained in turn (the
// launcher's exec, cgroup, Landlock and seccomp set-up), and overrides
// ns/op with the contained start. It reports the host binary as the
// launcher too, the fallback when wophost-launch is not beside it.
func BenchmarkPackStartContained(b *testing.B) {
	launcher := binary(b, "./cmd/wophost-launch")
	self := binary(b, "./cmd/host")
	support := sandbox.Probe()
	n := min(b.N, maxStarts)
	b.ResetTimer()
	contain := func(l string) *loader.Containment {
		return &loader.Containment{
			Support: support, Launcher: l, Policy: sandbox.Policy{MemoryBytes: config.DefaultSandboxMemoryBytes, Processes: config.DefaultSandboxProcesses},
			Dir: bin.probePack, StateDir: b.TempDir(),
		}
	}
	var plain, contained, viaHost time.Duration
	for range n {
		plain += timePackStart(b, nil)
		contained += timePackStart(b, contain(launcher))
		viaHost += timePackStart(b, contain(self))
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) }
	b.ReportMetric(per(contained), "ns/op")
	b.ReportMetric(per(plain)/1e6, "uncontained-ms/start")
	b.ReportMetric(per(contained)/1e6, "contained-ms/start")
	b.ReportMetric(per(viaHost)/1e6, "host-launcher-ms/start")
	b.ReportMetric(per(contained)/per(plain), "contained/uncontained")
}

// timePackStart starts the probe pack once, contained by c when it is not
// nil, and returns the time until its manifest answered.
func timePackStart(b *testing.B, c *loader.Containment) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	t0 := time.Now()
	exe, err := loader.OpenPackEntry(bin.probePack, "probe", loader.Checks{})
	if err != nil {
		b.Fatal(err)
	}
	p, err := loader.StartPack("private.wophost.probe", exe, loader.Options{
		Logger: hclog.NewNullLogger(), LogLevel: hclog.Off,
		MaxMessageBytes: config.DefaultMaxMessageBytes, StartTimeout: config.DefaultStartTimeout,
		HostVersion: "0.0.0-bench", Contain: c,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Kill()
	if _, err := p.Manifest(ctx); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

// startHostWithOptions is startHost with the host's options.
func startHostWithOptions(tb testing.TB, path string, opts host.Options) *host.Host {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	h, err := startWith(ctx, path, opts)
	if h != nil {
		tb.Cleanup(h.Close)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// requireContained fails tb unless every pack of h is contained as want
// says: a benchmark of containment must not measure the wrong thing.
func requireContained(tb testing.TB, h *host.Host, want bool) {
	tb.Helper()
	for _, p := range h.Packs() {
		if got := p.Sandbox != nil && p.Sandbox.Contained; got != want {
			tb.Fatalf("pack %s contained = %v, want %v", p.Name, got, want)
		}
	}
}
