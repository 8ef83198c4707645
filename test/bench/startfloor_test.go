package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
	b.ReportMetric(perStartMillis(startFloor(wall, cpu, n, runtime.GOMAXPROCS(0)), 1), "floor-ms/start")
	b.ReportMetric(perStartMillis(slowest, n), "solo-max-ms/start")
	b.ReportMetric(perStartMillis(sum, n), "solo-cpu-ms/start")
}

// perStartMillis is d, a total over n starts, in milliseconds per start.
func perStartMillis(d time.Duration, n int) float64 {
	return float64(d.Nanoseconds()) / float64(n) / 1e6
}

// bareStart execs the binaries at once with nothing of the protocol:
// without the handshake's variables each one starts its runtime, runs its
// packages' initialisation, says that it is a plugin and exits. It
// returns the wall time until the last one exited and each one's CPU time
// (user and system, from its rusage). The start of the same binaries one
// at a time and all at once, with no host in either, is what running six
// starts side by side costs on this machine by itself.
func bareStart(paths []string) (wall time.Duration, cpu []time.Duration, err error) {
	cmds := make([]*exec.Cmd, len(paths))
	t0 := time.Now()
	for i, p := range paths {
		cmds[i] = exec.Command(p)
		if err := cmds[i].Start(); err != nil {
			for _, c := range cmds[:i] {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
			return 0, nil, fmt.Errorf("bare start of %s: %w", p, err)
		}
	}
	cpu = make([]time.Duration, len(paths))
	for i, c := range cmds {
		werr := c.Wait()
		if werr != nil && !errors.As(werr, new(*exec.ExitError)) {
			err = errors.Join(err, fmt.Errorf("bare start of %s: %w", paths[i], werr))
		}
		cpu[i] = c.ProcessState.UserTime() + c.ProcessState.SystemTime()
	}
	return time.Since(t0), cpu, err
}

// bareTimes sums bareStart's figures for the same binaries, one at a time
// and all at once, over the starts of a benchmark.
type bareTimes struct {
	paths                 []string
	soloWall, soloCPU     []time.Duration
	together, togetherCPU time.Duration
	n                     int
}

func newBareTimes(paths []string) *bareTimes {
	return &bareTimes{paths: paths, soloWall: make([]time.Duration, len(paths)), soloCPU: make([]time.Duration, len(paths))}
}

// measure starts every binary alone, then all of them at once.
func (t *bareTimes) measure() error {
	for i, p := range t.paths {
		wall, cpu, err := bareStart([]string{p})
		if err != nil {
			return err
		}
		t.soloWall[i] += wall
		t.soloCPU[i] += cpu[0]
	}
	wall, cpu, err := bareStart(t.paths)
	if err != nil {
		return err
	}
	t.together += wall
	for _, c := range cpu {
		t.togetherCPU += c
	}
	t.n++
	return nil
}

// report gives, per start, the floor of the lone starts (startFloor's,
// bare-floor-ms/start), the wall time of the starts at once
// (bare-ms/start), and the CPU time of all six alone and at once
// (bare-solo-cpu-ms/start, bare-cpu-ms/start): two processes running at
// once on this machine's two cores each take more CPU time than alone,
// which the floor, a sum of lone starts, does not see.
func (t *bareTimes) report(b *testing.B) {
	if t.n == 0 {
		return
	}
	var solo time.Duration
	for _, c := range t.soloCPU {
		solo += c
	}
	b.ReportMetric(perStartMillis(solo, t.n), "bare-solo-cpu-ms/start")
	b.ReportMetric(perStartMillis(t.togetherCPU, t.n), "bare-cpu-ms/start")
	b.ReportMetric(perStartMillis(startFloor(t.soloWall, t.soloCPU, t.n, runtime.GOMAXPROCS(0)), 1), "bare-floor-ms/start")
	b.ReportMetric(perStartMillis(t.together, t.n), "bare-ms/start")
}
