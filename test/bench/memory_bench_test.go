package bench

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/test/testbin"
)

// idleSettle is how long BenchmarkIdleMemory lets the deployment sit
// after it is ready, so start-up garbage is collected and plugins are in
// their steady idle state. It is measurement settling, not a situation a
// test checks: no process signals "idle", the figures are reported, not
// asserted, and the benchmark runs only under -bench.
const idleSettle = 3 * time.Second

// process is one process of a running deployment.
type process struct {
	pid     int
	command string
	rssKiB  int
}

// readProcess reads a process's resident set size.
func readProcess(pid int, command string) (process, error) {
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return process{}, err
	}
	p := process{pid: pid, command: command}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				return process{}, fmt.Errorf("pid %d: VmRSS %q: %v", pid, rest, err)
			}
			p.rssKiB = kib
		}
	}
	return p, nil
}

// waitReady polls GET /readyz until it answers 200.
func waitReady(tb testing.TB, base string) {
	tb.Helper()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		res, err := http.Get(base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatalf("%s/readyz never answered 200", base)
}

// BenchmarkIdleMemory runs `host serve` with the demo deployment (four
// family plugins, the kv plugin, the kvdemo pack, the toolbox MCP server
// under the mcp plugin), lets it settle, and reports the resident set of
// the host process, of the largest capability plugin and of the pack.
// b.N does not apply: one deployment is measured once.
func BenchmarkIdleMemory(b *testing.B) {
	base, cmd := startServe(b, demoDeployment(b))
	waitReady(b, base)
	time.Sleep(idleSettle)
	b.ResetTimer()
	host, err := readProcess(cmd.Process.Pid, "host")
	if err != nil {
		b.Fatal(err)
	}
	var procs []process
	for _, d := range testbin.Descendants(cmd.Process.Pid) {
		p, err := readProcess(d.PID, d.Command)
		if err != nil {
			b.Fatal(err)
		}
		procs = append(procs, p)
	}
	b.StopTimer()
	var plugin, pack process
	for _, p := range procs {
		b.Logf("pid %d %s: %.1f MB", p.pid, p.command, float64(p.rssKiB)/1024)
		switch {
		case strings.HasPrefix(p.command, bin.kvdemoPack):
			if p.rssKiB > pack.rssKiB {
				pack = p
			}
		case strings.Contains(p.command, "toolbox"):
			// The MCP server is the operator's, not a wophost process.
		default:
			if p.rssKiB > plugin.rssKiB {
				plugin = p
			}
		}
	}
	if plugin.pid == 0 || pack.pid == 0 {
		b.Fatalf("no plugin or pack process below the host: %+v", procs)
	}
	b.Logf("host %.1f MB; largest plugin %s %.1f MB", float64(host.rssKiB)/1024, plugin.command, float64(plugin.rssKiB)/1024)
	b.ReportMetric(float64(host.rssKiB)/1024, "host-MB")
	b.ReportMetric(float64(plugin.rssKiB)/1024, "plugin-MB")
	b.ReportMetric(float64(pack.rssKiB)/1024, "pack-MB")
}
