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
	c := &packChaos{d: startServe(t, reloadDeployment(t)), readyz: map[int]int{}}
	c.startLoad()
	if !t.Run("each killed pack is refused in the host's words, then serves again", c.killInTurn) {
		t.FailNow()
	}
	c.load.halt()
	c.logFigures(t)

	t.Run("the killed pack's runs fail only as retryable unavailable naming the pack", c.killedPackFailuresWellFormed)
	t.Run("the pack nobody killed never fails", c.otherPackNeverFailed)
	t.Run("the packs list reports the pack degraded with its restarts", c.packsListed)
	t.Run("the metrics report the pack's restarts and state", c.metricsReported)
	t.Run("readyz says 503 while the pack is down and 200 once it is back", c.readyzFollows)
	t.Run("serve exits 0 on SIGTERM", func(t *testing.T) {
		if code := c.d.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit %d:\n%s", code, c.d.log())
		}
	})
}

// packChaos is host serve under load while the kvdemo pack is killed, and
// what the load saw.
type packChaos struct {
	d    *daemon
	load workers
	// mu guards what the load records.
	mu                         sync.Mutex
	otherFailures, badFailures []string
	kvOK, kvFailed, otherOK    int
	readyz                     map[int]int // /readyz status → times sampled

	// windows and recoveries run from each kill to the host answering in
	// its own words, and to kvdemo serving again.
	windows, recoveries []time.Duration
}

// startLoad starts two kvdemo clients, one probe client and a /readyz
// sampler.
func (c *packChaos) startLoad() {
	for w := range 2 {
		c.load.loop(func(i int) {
			status, body := c.d.execute("kvdemo.remember", fmt.Sprintf(`{"key":"k%d-%d","value":"v%d"}`, w, i%10, i))
			c.mu.Lock()
			defer c.mu.Unlock()
			if succeeded(status, body) {
				c.kvOK++
				return
			}
			c.kvFailed++
			// Refused while the pack is down (503 runner_unavailable), or
			// a run the pack's exit cut short (200, failed, unavailable).
			refused := status == 503 && strings.Contains(body, `"error":"runner_unavailable"`)
			cut := status == 200 && strings.Contains(body, `"status":"failed"`) && strings.Contains(body, `"code":"unavailable"`)
			if !refused && !cut || !strings.Contains(body, `"retryable":true`) ||
				!strings.Contains(body, "community.wophost.kvdemo") || strings.Contains(body, "dial") || strings.Contains(body, ".sock") || strings.Contains(body, "/tmp/") {
				c.badFailures = append(c.badFailures, fmt.Sprintf("%d %s", status, body))
			}
		})
	}
	c.load.loop(func(int) {
		status, body := c.d.execute("probe.echo", `{"ok":true}`)
		c.mu.Lock()
		defer c.mu.Unlock()
		if succeeded(status, body) {
			c.otherOK++
		} else {
			c.otherFailures = append(c.otherFailures, fmt.Sprintf("%d %s", status, body))
		}
	})
	client := &http.Client{Timeout: time.Minute}
	c.load.loop(func(int) {
		status := 0
		if resp, err := client.Get(c.d.base + "/readyz"); err == nil {
			status = resp.StatusCode
			resp.Body.Close()
		}
		c.mu.Lock()
		c.readyz[status]++
		c.mu.Unlock()
		time.Sleep(20 * time.Millisecond) // the sampling pace of /readyz
	})
}

func (c *packChaos) killInTurn(t *testing.T) {
	for k := range packKills {
		if !t.Run(fmt.Sprintf("kill %d", k), func(t *testing.T) {
			c.served(t)
			c.killAndRecover(t, k)
		}) {
			t.FailNow()
		}
	}
}

// served waits until the load is served by the pack of the moment: runs of
// both packs have been answered again.
func (c *packChaos) served(t *testing.T) {
	c.mu.Lock()
	kvBefore, otherBefore := c.kvOK, c.otherOK
	c.mu.Unlock()
	waitUntil(t, "the load to be served again", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.kvOK >= kvBefore+4 && c.otherOK >= otherBefore+2
	})
}

// killAndRecover kills the kvdemo pack and measures the failure window,
// until the host refuses the dead pack's runs in its own words rather than
// failing them against the socket, and the time until kvdemo serves again.
func (c *packChaos) killAndRecover(t *testing.T, k int) {
	pids := childrenOf(c.d.cmd.Process.Pid, "kvdemo")
	if len(pids) != 1 {
		t.Fatalf("kill %d: kvdemo pack processes %v, want one", k, pids)
	}
	killed := time.Now()
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var noticed time.Time
	deadline := killed.Add(30 * time.Second)
	for {
		status, body := c.d.execute("kvdemo.remember", `{"key":"probe","value":"up?"}`)
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
			t.Fatalf("kill %d: kvdemo did not come back within 30 s: %d %s\n%s", k, status, body, c.d.log())
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.windows = append(c.windows, noticed.Sub(killed))
	c.recoveries = append(c.recoveries, time.Since(killed))
}

func (c *packChaos) logFigures(t *testing.T) {
	windows, recoveries := append([]time.Duration(nil), c.windows...), append([]time.Duration(nil), c.recoveries...)
	sort.Slice(recoveries, func(i, j int) bool { return recoveries[i] < recoveries[j] })
	sort.Slice(windows, func(i, j int) bool { return windows[i] < windows[j] })
	t.Logf("pack chaos: %d SIGKILLs of the kvdemo pack under 3 clients; kvdemo runs ok %d, failed %d (all retryable unavailable naming the pack: %v); probe runs ok %d, failed %d",
		packKills, c.kvOK, c.kvFailed, len(c.badFailures) == 0, c.otherOK, len(c.otherFailures))
	t.Logf("until the host answers in its own words: p50 %s, max %s; until kvdemo serves again: p50 %s, max %s; /readyz answers %v",
		windows[len(windows)/2].Round(time.Millisecond), windows[len(windows)-1].Round(time.Millisecond),
		recoveries[len(recoveries)/2].Round(time.Millisecond), recoveries[len(recoveries)-1].Round(time.Millisecond), c.readyz)
}

func (c *packChaos) killedPackFailuresWellFormed(t *testing.T) {
	if len(c.badFailures) > 0 {
		t.Errorf("%d runs of the killed pack failed otherwise than unavailable, retryable, naming the pack: %v", len(c.badFailures), c.badFailures[:min(3, len(c.badFailures))])
	}
}

func (c *packChaos) otherPackNeverFailed(t *testing.T) {
	if len(c.otherFailures) > 0 {
		t.Errorf("the pack nobody killed failed: %v", c.otherFailures[:min(3, len(c.otherFailures))])
	}
}

func (c *packChaos) packsListed(t *testing.T) {
	packs := request(t, "GET", c.d.base+"/v1/packs", "", nil)
	restarts := regexp.MustCompile(`"name":"community.wophost.kvdemo"[^}]*"state":"(\w+)"[^}]*"restarts":(\d+)`).FindStringSubmatch(packs.body)
	if restarts == nil || restarts[1] != "degraded" || restarts[2] != fmt.Sprint(packKills) {
		t.Errorf("/v1/packs after %d kills: %s", packKills, packs.body)
	}
}

func (c *packChaos) metricsReported(t *testing.T) {
	metrics := request(t, "GET", c.d.base+"/metrics", "", nil).body
	if !strings.Contains(metrics, fmt.Sprintf(`wophost_pack_restarts_total{pack="community.wophost.kvdemo"} %d`, packKills)) ||
		!strings.Contains(metrics, `wophost_pack_state{pack="community.wophost.kvdemo",state="degraded"} 1`) {
		t.Errorf("metrics after the kills lack the pack's restarts or state:\n%s", grepLines(metrics, "wophost_pack_"))
	}
}

func (c *packChaos) readyzFollows(t *testing.T) {
	if c.readyz[503] == 0 {
		t.Error("/readyz never said 503 while the pack was down")
	}
	if ready := request(t, "GET", c.d.base+"/readyz", "", nil); ready.status != 200 {
		t.Errorf("/readyz after the pack came back: %d %s", ready.status, ready.body)
	}
}
