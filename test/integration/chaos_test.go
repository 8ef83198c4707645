package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/sdk/wop"
)

// chaosKills is how many times the chaos test kills the aiEnvelope plugin.
const chaosKills = 4

// children returns the pids of the processes whose parent is this one
// and whose command line contains name ("" for all of them).
func children(name string) []int {
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the parenthesised command: state, ppid, ...
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) || fields[0] == "Z" {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if name == "" || strings.Contains(string(cmd), name) {
			out = append(out, pid)
		}
	}
	return out
}

func openFDs() int {
	entries, _ := os.ReadDir("/proc/self/fd")
	return len(entries)
}

// TestChaos keeps a steady load of ctx calls from pack code on two
// families while the aiEnvelope plugin is killed with SIGKILL again and
// again. The echo family must serve throughout, aiEnvelope must come back
// within the restart backoff, every envelope it accepted must still be
// answered from its store with the same id, and nothing may leak.
// `go test -v -run TestChaos ./test/integration/` prints the figures.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test skipped in -short mode")
	}
	goroutinesBefore, fdsBefore := runtime.NumGoroutine(), openFDs()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.json"), []byte(`{"rules":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir  = "BIN"
  crash_limit = 100
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "ai" {
  plugin = %q
}
pack "test.probe" { path = %q }
`, binary(t, "./plugins/aienvelope"), probePack(t)))
	h := startHost(t, cfg)

	call := func(family, method, payload string) (json.RawMessage, error) {
		in := fmt.Sprintf(`{"family":%q,"method":%q,"payload":%s}`, family, method, payload)
		res, err := h.Run(context.Background(), "probe.call", json.RawMessage(in), host.RunOptions{Timeout: 30 * time.Second})
		if err != nil {
			return nil, err
		}
		return res.Output, nil
	}

	var mu sync.Mutex
	served := map[string]int{}
	errorsByCode := map[string]int{}
	accepted := map[string]string{} // idempotency key → envelopeId
	var echoFailures []string

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := call("test.echo", "echo", `{"w":1}`); err != nil {
					mu.Lock()
					echoFailures = append(echoFailures, err.Error())
					mu.Unlock()
				} else {
					mu.Lock()
					served["test.echo"]++
					mu.Unlock()
				}
				key := fmt.Sprintf("chaos-%d-%d", w, i)
				out, err := call("aiEnvelope", "generate", fmt.Sprintf(`{"envelopeType":"chaos","userMessage":"n %d","idempotencyKey":%q}`, i, key))
				mu.Lock()
				if err != nil {
					errorsByCode[wop.CodeOf(err)]++
				} else {
					var r struct {
						EnvelopeID string `json:"envelopeId"`
					}
					if json.Unmarshal(out, &r) == nil && r.EnvelopeID != "" {
						accepted[key] = r.EnvelopeID
						served["aiEnvelope"]++
					}
				}
				mu.Unlock()
			}
		}()
	}

	var recoveries []time.Duration
	for k := range chaosKills {
		time.Sleep(300 * time.Millisecond)
		pids := children("aienvelope")
		if len(pids) != 1 {
			t.Fatalf("kill %d: aiEnvelope plugin processes %v, want one", k, pids)
		}
		killed := time.Now()
		if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Recovered when a generate from pack code succeeds again.
		deadline := killed.Add(30 * time.Second)
		for {
			if _, err := call("aiEnvelope", "generate", fmt.Sprintf(`{"envelopeType":"probe","userMessage":"up?","idempotencyKey":"probe-%d-%d"}`, k, time.Now().UnixNano())); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: aiEnvelope did not come back within 30 s", k)
			}
			time.Sleep(20 * time.Millisecond)
		}
		recoveries = append(recoveries, time.Since(killed))
	}
	close(stop)
	wg.Wait()

	// Nothing accepted is lost: every envelope answers again, same id.
	mu.Lock()
	keys := make([]string, 0, len(accepted))
	for k := range accepted {
		keys = append(keys, k)
	}
	mu.Unlock()
	lost := 0
	for _, key := range keys {
		var i int
		parts := strings.Split(key, "-")
		i, _ = strconv.Atoi(parts[len(parts)-1])
		out, err := call("aiEnvelope", "generate", fmt.Sprintf(`{"envelopeType":"chaos","userMessage":"n %d","idempotencyKey":%q}`, i, key))
		var r struct {
			EnvelopeID string `json:"envelopeId"`
		}
		if err != nil || json.Unmarshal(out, &r) != nil || r.EnvelopeID != accepted[key] {
			lost++
			t.Errorf("envelope %s (%s) lost: %s %v", key, accepted[key], out, err)
		}
	}

	h.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && (len(children("")) > 0 || runtime.NumGoroutine() > goroutinesBefore+5) {
		time.Sleep(50 * time.Millisecond)
	}
	procsLeft, goroutineLeak, fdLeak := len(children("")), runtime.NumGoroutine()-goroutinesBefore, openFDs()-fdsBefore

	slices.Sort(recoveries)
	t.Logf("chaos: %d kills of the aiEnvelope plugin under load from 3 workers", chaosKills)
	t.Logf("calls served: test.echo %d, aiEnvelope %d; echo failures %d; aiEnvelope errors by code %v",
		served["test.echo"], served["aiEnvelope"], len(echoFailures), errorsByCode)
	t.Logf("recovery after a kill: p50 %s, max %s", recoveries[len(recoveries)/2].Round(time.Millisecond), recoveries[len(recoveries)-1].Round(time.Millisecond))
	t.Logf("accepted envelopes %d, lost %d; after Close: processes left %d, goroutines %+d, file descriptors %+d",
		len(keys), lost, procsLeft, goroutineLeak, fdLeak)

	if len(echoFailures) > 0 {
		t.Errorf("test.echo failed while aiEnvelope was killed: %v", echoFailures[:min(3, len(echoFailures))])
	}
	for code := range errorsByCode {
		if code != wop.CodeUnavailable && code != wop.CodeCapabilityNotProvided {
			t.Errorf("aiEnvelope failed with %s during the kills; want only unavailable or capability_not_provided", code)
		}
	}
	if served["aiEnvelope"] == 0 || len(keys) == 0 {
		t.Error("no aiEnvelope call succeeded under load")
	}
	if procsLeft > 0 {
		t.Errorf("%d processes outlived Close", procsLeft)
	}
	if goroutineLeak > 5 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines more than before the host started:\n%s", goroutineLeak, buf[:runtime.Stack(buf, true)])
	}
	if fdLeak > 3 {
		t.Errorf("%d file descriptors more than before the host started", fdLeak)
	}
}
