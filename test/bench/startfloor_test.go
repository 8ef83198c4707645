package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
)

// soloStart starts one process of the demo deployment alone, the way the
// host starts it, so that its wall time and CPU time are not shared with
// the others'.
type soloStart struct {
	name string
	// path is the config that starts the process: the block alone for a
	// capability; for a pack, the kv capability it needs, with packPath
	// (the same plus the pack) reloaded over it, so that only the pack
	// starts in the timed part.
	path     string
	packPath string
}

// soloStarts writes a solo config for every block of demoBlocks.
func soloStarts(tb testing.TB) []soloStart {
	tb.Helper()
	blocks := demoBlocks(tb)
	var out []soloStart
	for _, blk := range blocks {
		if !blk.pack {
			out = append(out, soloStart{name: blk.name, path: writeConfig(tb, blk.text)})
			continue
		}
		// demoBlocks puts kv, the pack's one required peer, first.
		path := writeConfig(tb, blocks[0].text)
		base, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		packPath := filepath.Join(filepath.Dir(path), "host-pack.hcl")
		if err := os.WriteFile(packPath, append(base, blk.text...), 0o644); err != nil {
			tb.Fatal(err)
		}
		out = append(out, soloStart{name: blk.name, path: path, packPath: packPath})
	}
	return out
}

// run starts the process and returns the wall time until it was ready and
// the CPU time it (and any process it started) used until then. Whatever
// it started is stopped before it returns.
func (s soloStart) run(ctx context.Context, tb testing.TB) (wall, cpu time.Duration, err error) {
	tb.Helper()
	if s.packPath == "" {
		t0 := time.Now()
		h, err := start(ctx, s.path)
		wall = time.Since(t0)
		if h != nil {
			defer h.Close()
		}
		if err != nil {
			return 0, 0, fmt.Errorf("solo start of %s: %w", s.name, err)
		}
		return wall, treeCPUOf(tb, processID(tb, h, s.name)), nil
	}
	base, err := start(ctx, s.path)
	if base != nil {
		defer base.Close()
	}
	if err != nil {
		return 0, 0, fmt.Errorf("solo start of %s, its peers: %w", s.name, err)
	}
	cfg, ldr, diags := config.Load(s.packPath)
	if diags.HasErrors() {
		return 0, 0, fmt.Errorf("solo start of %s: %s", s.name, config.FormatDiagnostics(diags))
	}
	t0 := time.Now()
	h, rep, err := base.Reload(ctx, cfg, ldr)
	wall = time.Since(t0)
	if h != nil {
		// Closed before base (defers run last in, first out): base then
		// stops only what h did not take over.
		defer h.Close()
	}
	if err == nil && rep != nil && rep.All().HasErrors() {
		err = errors.New(config.FormatDiagnostics(rep.All()))
	}
	if err == nil {
		err = packsReady(h)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("solo start of %s: %w", s.name, err)
	}
	return wall, treeCPUOf(tb, processID(tb, h, s.name)), nil
}

// packsReady is start's check of the packs of h.
func packsReady(h *host.Host) error {
	for _, p := range h.Packs() {
		if p.State != host.PackReady && p.State != host.PackDegraded {
			return fmt.Errorf("pack %s is %s: %s", p.Name, p.State, p.Error)
		}
	}
	return nil
}

// startFloor is what a start of every process in solos could take at
// best: the slowest solo start, or all their CPU time spread over
// GOMAXPROCS cores, whichever is larger. wall and cpu hold each process's
// totals over n starts; the floor is per start.
func startFloor(wall, cpu []time.Duration, n, procs int) time.Duration {
	var slowest, sum time.Duration
	for i := range wall {
		slowest = max(slowest, wall[i])
		sum += cpu[i]
	}
	return max(slowest, sum/time.Duration(procs)) / time.Duration(n)
}

func TestStartFloor(t *testing.T) {
	ms := time.Millisecond
	for _, tt := range []struct {
		name      string
		wall, cpu []time.Duration
		n, procs  int
		want      time.Duration
	}{
		{"slowest process bounds", []time.Duration{40 * ms, 90 * ms}, []time.Duration{30 * ms, 50 * ms}, 1, 2, 90 * ms},
		{"cpu over the cores bounds", []time.Duration{40 * ms, 50 * ms}, []time.Duration{100 * ms, 102 * ms}, 1, 2, 101 * ms},
		{"one core takes the sum", []time.Duration{40 * ms, 50 * ms}, []time.Duration{30 * ms, 30 * ms}, 1, 1, 60 * ms},
		{"per start over n", []time.Duration{400 * ms}, []time.Duration{100 * ms}, 10, 2, 40 * ms},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := startFloor(tt.wall, tt.cpu, tt.n, tt.procs); got != tt.want {
				t.Fatalf("startFloor = %v, want %v", got, tt.want)
			}
		})
	}
}

// reportStartFloor adds the floor of BenchmarkStartToReady and its parts,
// per start: floor-ms/start, the slowest solo start (solo-max-ms/start)
// and the solo starts' summed CPU time (solo-cpu-ms/start).
func reportStartFloor(b *testing.B, wall, cpu []time.Duration, n int) {
	var slowest, sum time.Duration
	for i := range wall {
		slowest = max(slowest, wall[i])
		sum += cpu[i]
	}
	perStart := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) / 1e6 }
	b.ReportMetric(float64(startFloor(wall, cpu, n, runtime.GOMAXPROCS(0)).Nanoseconds())/1e6, "floor-ms/start")
	b.ReportMetric(perStart(slowest), "solo-max-ms/start")
	b.ReportMetric(perStart(sum), "solo-cpu-ms/start")
}
