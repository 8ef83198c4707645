package integration

import (
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// packKills is how many times TestChaosPackKill kills the kvdemo pack.
const packKills = 4

// TestChaosPackKill keeps a steady load of node runs on two packs through
// `host serve` while one of them is killed with SIGKILL again and again.
// The host must notice each exit, answer the dead pack's runs with a
// retryable unavailable that names the pack (never a socket path), keep
// the other pack serving, restart the killed one, report it in /v1/packs,
// /readyz and the metrics, and serve its nodes again.
// `go test -v -run TestChaosPackKill ./test/integration/` prints the figures.
func TestChaosPackKill(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test skipped in -short mode")
	}
	cfg := reloadDeployment(t)
	d := startServe(t, cfg)
	client := &http.Client{Timeout: time.Minute}
	execute := d.execute

	var mu sync.Mutex
	var otherFailures, badFailures []string
	kvOK, kvFailed, otherOK := 0, 0, 0
	readyz := map[int]int{}
	var load workers
	loop := load.loop
	for w := range 2 {
		loop(func(i int) {
			status, body := execute("kvdemo.remember", fmt.Sprintf(`{"key":"k%d-%d","value":"v%d"}`, w, i%10, i))
			mu.Lock()
			defer mu.Unlock()
			if succeeded(status, body) {
				kvOK++
				return
			}
			kvFailed++
			// Refused while the pack is down (503 runner_unavailable), or
			// a run the pack's exit cut short (200, failed, unavailable).
			refused := status == 503 && strings.Contains(body, `"error":"runner_unavailable"`)
			cut := status == 200 && strings.Contains(body, `"status":"failed"`) && strings.Contains(body, `"code":"unavailable"`)
			if !refused && !cut || !strings.Contains(body, `"retryable":true`) ||
				!strings.Contains(body, "community.wophost.kvdemo") || strings.Contains(body, "dial") || strings.Contains(body, ".sock") || strings.Contains(body, "/tmp/") {
				badFailures = append(badFailures, fmt.Sprintf("%d %s", status, body))
			}
		})
	}
	loop(func(int) {
		status, body := execute("probe.echo", `{"ok":true}`)
		mu.Lock()
		defer mu.Unlock()
		if succeeded(status, body) {
			otherOK++
		} else {
			otherFailures = append(otherFailures, fmt.Sprintf("%d %s", status, body))
		}
	})
	loop(func(int) {
		status := 0
		if resp, err := client.Get(d.base + "/readyz"); err == nil {
			status = resp.StatusCode
			resp.Body.Close()
		}
		mu.Lock()
		readyz[status]++
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // the sampling pace of /readyz
	})

	var windows, recoveries []time.Duration
	for k := range packKills {
		// The load is served by the pack of the moment before it is
		// killed: runs of both packs have been answered again.
		mu.Lock()
		kvBefore, otherBefore := kvOK, otherOK
		mu.Unlock()
		waitUntil(t, "the load to be served again", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return kvOK >= kvBefore+4 && otherOK >= otherBefore+2
		})
		pids := childrenOf(d.cmd.Process.Pid, "kvdemo")
		if len(pids) != 1 {
			t.Fatalf("kill %d: kvdemo pack processes %v, want one", k, pids)
		}
		killed := time.Now()
		if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// The failure window: until the host refuses the dead pack's runs
		// in its own words rather than failing them against the socket.
		var noticed time.Time
		deadline := killed.Add(30 * time.Second)
		for {
			status, body := execute("kvdemo.remember", `{"key":"probe","value":"up?"}`)
			if status == 503 && noticed.IsZero() {
				noticed = time.Now()
			}
			if succeeded(status, body) {
				if noticed.IsZero() {
					noticed = time.Now()
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: kvdemo did not come back within 30 s: %d %s\n%s", k, status, body, d.log())
			}
			time.Sleep(10 * time.Millisecond)
		}
		windows = append(windows, noticed.Sub(killed))
		recoveries = append(recoveries, time.Since(killed))
	}
	load.halt()

	packs := request(t, "GET", d.base+"/v1/packs", "", nil)
	restarts := regexp.MustCompile(`"name":"community.wophost.kvdemo"[^}]*"state":"(\w+)"[^}]*"restarts":(\d+)`).FindStringSubmatch(packs.body)
	metrics := request(t, "GET", d.base+"/metrics", "", nil).body
	ready := request(t, "GET", d.base+"/readyz", "", nil)
	sort.Slice(recoveries, func(i, j int) bool { return recoveries[i] < recoveries[j] })
	sort.Slice(windows, func(i, j int) bool { return windows[i] < windows[j] })
	t.Logf("pack chaos: %d SIGKILLs of the kvdemo pack under 3 clients; kvdemo runs ok %d, failed %d (all retryable unavailable naming the pack: %v); probe runs ok %d, failed %d",
		packKills, kvOK, kvFailed, len(badFailures) == 0, otherOK, len(otherFailures))
	t.Logf("until the host answers in its own words: p50 %s, max %s; until kvdemo serves again: p50 %s, max %s; /readyz answers %v",
		windows[len(windows)/2].Round(time.Millisecond), windows[len(windows)-1].Round(time.Millisecond),
		recoveries[len(recoveries)/2].Round(time.Millisecond), recoveries[len(recoveries)-1].Round(time.Millisecond), readyz)

	if len(badFailures) > 0 {
		t.Errorf("%d runs of the killed pack failed otherwise than unavailable, retryable, naming the pack: %v", len(badFailures), badFailures[:min(3, len(badFailures))])
	}
	if len(otherFailures) > 0 {
		t.Errorf("the pack nobody killed failed: %v", otherFailures[:min(3, len(otherFailures))])
	}
	if restarts == nil || restarts[1] != "degraded" || restarts[2] != fmt.Sprint(packKills) {
		t.Errorf("/v1/packs after %d kills: %s", packKills, packs.body)
	}
	if !strings.Contains(metrics, fmt.Sprintf(`wophost_pack_restarts_total{pack="community.wophost.kvdemo"} %d`, packKills)) ||
		!strings.Contains(metrics, `wophost_pack_state{pack="community.wophost.kvdemo",state="degraded"} 1`) {
		t.Errorf("metrics after the kills lack the pack's restarts or state:\n%s", grepLines(metrics, "wophost_pack_"))
	}
	if readyz[503] == 0 {
		t.Error("/readyz never said 503 while the pack was down")
	}
	if ready.status != 200 {
		t.Errorf("/readyz after the pack came back: %d %s", ready.status, ready.body)
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d:\n%s", code, d.log())
	}
}
