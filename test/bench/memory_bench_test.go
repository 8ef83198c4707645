package bench

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// idleSettle is how long BenchmarkIdleMemory lets the deployment sit
// after it is ready, so start-up garbage is collected and plugins are in
// their steady idle state.
const idleSettle = 3 * time.Second

// process is one process of a running deployment.
type process struct {
	pid     int
	command string
	rssKiB  int
}

// descendants returns the processes below pid, children first.
func descendants(pid int) ([]process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	parent := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the parenthesised command: state, ppid, ...
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		parent[ppid] = append(parent[ppid], p)
	}
	var out []process
	queue := []int{pid}
	for len(queue) > 0 {
		for _, child := range parent[queue[0]] {
			p, err := readProcess(child)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
			queue = append(queue, child)
		}
		queue = queue[1:]
	}
	return out, nil
}

// readProcess reads a process's command line and resident set size.
func readProcess(pid int) (process, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return process{}, err
	}
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return process{}, err
	}
	p := process{pid: pid, command: string(bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '}))}
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
	host, err := readProcess(cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	procs, err := descendants(cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
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
