package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/test/testbin"
)

// childrenOf returns the pids of the live processes whose parent is pid
// and whose command line contains name.
func childrenOf(pid int, name string) []int {
	var out []int
	for _, p := range testbin.Processes() {
		if p.PPID == pid && p.State != "Z" && strings.Contains(p.Command, name) {
			out = append(out, p.PID)
		}
	}
	sort.Ints(out)
	return out
}

// reloadConfig is the deployment of the reload tests: the stateful kv and
// aiEnvelope plugins, the stateless echo plugin, the probe pack and the
// kvdemo pack. kvMax and aiAttempts are config values a reload can change.
func reloadConfig(t *testing.T, path string, kvMax, aiAttempts int) {
	t.Helper()
	text := fmt.Sprintf(`
host {
  plugin_dir = %q
  state_dir  = %q
  http {
    listen = "127.0.0.1:0"
  }
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "kv" {
  plugin = "wophost-kv"
  config {
    max_value_bytes = %d
  }
}
capability "ai" {
  plugin = %q
  config {
    retry {
      max_attempts = %d
    }
  }
}
pack "private.wophost.probe" {
  path = %q
  # The test has it write where the test looks, or start processes:
  # it runs uncontained (containment has its own tests).
  sandbox { enabled = false }
}
pack "community.wophost.kvdemo" { path = %q }
`, bin.dir, filepath.Join(filepath.Dir(path), "state"), kvMax, binary(t, "./plugins/aienvelope"), aiAttempts,
		filepath.Join(filepath.Dir(path), "probe"), filepath.Join(filepath.Dir(path), "kvdemo"))
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// reloadDeployment lays out the packs of reloadConfig beside a fresh
// host.hcl and returns its path.
func reloadDeployment(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := testbin.LayOutPack("test/packs/probe", bin.probe, filepath.Join(dir, "probe")); err != nil {
		t.Fatal(err)
	}
	if err := testbin.LayOutPack("examples/packs/kvdemo", binary(t, "./examples/packs/kvdemo"), filepath.Join(dir, "kvdemo")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "host.hcl")
	reloadConfig(t, path, 65536, 3)
	return path
}

// reloadAndWait sends SIGHUP and waits for the n-th "reloaded" or
// "reload refused" line of the daemon's log; it returns that line's kind.
func (d *daemon) reloadAndWait(t *testing.T, n int) string {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// A reload here takes seconds; a minute leaves a loaded machine room
	// and still fails a reload that never ends soon.
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		log := d.log()
		done := strings.Count(log, "reloaded; the previous host") + strings.Count(log, "reload refused")
		if done >= n {
			if strings.Count(log, "reload refused") > 0 && strings.LastIndex(log, "reload refused") > strings.LastIndex(log, "reloaded; the previous host") {
				return "refused"
			}
			return "reloaded"
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("reload %d did not finish within a minute:\n%s", n, d.log())
	return ""
}

// A reload keeps every plugin whose block, binary and host settings did
// not change (same process), replaces the one that changed, and starts
// the packs anew; the call in flight finishes on the previous set.
func TestServeReload(t *testing.T) {
	cfg := serveConfig(t, "", "")
	d := startServe(t, cfg)
	before := request(t, "GET", d.base+"/.well-known/openwop", "", nil)
	if strings.Contains(before.body, "test.other") {
		t.Fatalf("test.other advertised before the reload: %s", before.body)
	}

	good, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	more := string(good) + "capability \"other\" {\n  plugin   = \"testcap\"\n  families = [\"test.other\"]\n}\n"
	if err := os.WriteFile(cfg, []byte(more), 0o644); err != nil {
		t.Fatal(err)
	}
	// A call in flight at the reload finishes on the old pack: it has
	// reached the pack (its pidfile) and is held there until the test
	// releases it, after the reload is done.
	dir := t.TempDir()
	pidfile, release := filepath.Join(dir, "pids"), filepath.Join(dir, "release")
	inFlight := requestAsync("POST", d.base+"/v1/nodes/probe.sleep:execute",
		`{"input":{"ms":600000,"inPack":true,"pidfile":"`+pidfile+`","until":"`+release+`"}}`)
	pids := readPIDs(t, pidfile)
	oldPack, echo := pids[0], pids[1]
	if got := d.reloadAndWait(t, 1); got != "reloaded" {
		t.Fatalf("reload: %s\n%s", got, d.log())
	}
	if !strings.Contains(d.log(), "reloading") {
		t.Fatalf("the host never logged the reload's start:\n%s", d.log())
	}
	select {
	case r := <-inFlight:
		t.Fatalf("the call ended before it was released: %d %s", r.status, r.body)
	default:
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := <-inFlight; r.status != 200 || !strings.Contains(r.body, `"released":true`) {
		t.Fatalf("the call in flight during the reload: %d %s", r.status, r.body)
	}
	assertGone(t, "the previous pack process after the reload", []int{oldPack})
	if !alive(echo) {
		t.Fatal("the unchanged echo plugin was stopped by the reload")
	}
	if !strings.Contains(d.log(), `capability kept across the reload: capability=echo`) {
		t.Errorf("no log line says echo was kept:\n%s", d.log())
	}
	after := request(t, "GET", d.base+"/.well-known/openwop", "", nil)
	if !strings.Contains(after.body, "test.other") || after.header.Get("ETag") == before.header.Get("ETag") {
		t.Fatalf("after the reload: %s (ETag %s, before %s)", after.body, after.header.Get("ETag"), before.header.Get("ETag"))
	}
	// The kept plugin serves the new host: a node's call reaches the same
	// process.
	pidfile2 := filepath.Join(t.TempDir(), "pids")
	if r := request(t, "POST", d.base+"/v1/nodes/probe.sleep:execute", `{"input":{"ms":1,"inPack":true,"pidfile":"`+pidfile2+`"}}`, nil); r.status != 200 {
		t.Fatalf("execute after the reload: %d %s", r.status, r.body)
	}
	if got := readPIDs(t, pidfile2); got[1] != echo || got[0] == oldPack {
		t.Fatalf("after the reload the node ran in pack %d with plugin %d; want a new pack and plugin %d", got[0], got[1], echo)
	}

	// A changed block gets a new process; the old one stops.
	changed := strings.Replace(more, "families = [\"test.echo\"]\n", "families = [\"test.echo\"]\n  config {\n    greeting = \"hello again\"\n  }\n", 1)
	if err := os.WriteFile(cfg, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := d.reloadAndWait(t, 2); got != "reloaded" {
		t.Fatalf("second reload: %s\n%s", got, d.log())
	}
	assertGone(t, "the echo plugin whose config changed", []int{echo})

	if err := os.WriteFile(cfg, []byte(changed+"capability \"broken\" {\n  plugin = 42\n  nonsense = true\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := d.reloadAndWait(t, 3); got != "refused" {
		t.Fatalf("a broken config: %s", got)
	}
	if !strings.Contains(d.log(), "host.hcl:") {
		t.Errorf("the refusal does not name file:line:col:\n%s", d.log())
	}
	still := request(t, "GET", d.base+"/.well-known/openwop", "", nil)
	if still.status != 200 || still.body != after.body {
		t.Fatalf("after a refused reload: %d %s", still.status, still.body)
	}
	if r := request(t, "POST", d.base+"/v1/nodes/probe.echo:execute", `{"input":{"ok":true}}`, nil); r.status != 200 {
		t.Fatalf("execute after a refused reload: %d %s", r.status, r.body)
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d:\n%s", code, d.log())
	}
}

// A reload under which something that serves now would stop serving is
// refused, and the running host keeps serving it: here the single-writer
// kv plugin, already stopped for its replacement when the new config is
// refused, is started again.
func TestServeReloadRefusedWhenItWouldLoseACapability(t *testing.T) {
	cfg := reloadDeployment(t)
	d := startServe(t, cfg)
	remember := func(value string) reply {
		return request(t, "POST", d.base+"/v1/nodes/kvdemo.remember:execute", `{"input":{"key":"k","value":"`+value+`"}}`, nil)
	}
	if r := remember("before"); r.status != 200 {
		t.Fatalf("before the reload: %d %s", r.status, r.body)
	}
	reloadConfig(t, cfg, 0, 3) // max_value_bytes = 0: the kv plugin refuses it
	if got := d.reloadAndWait(t, 1); got != "refused" {
		t.Fatalf("a reload losing kv and the kvdemo pack: %s\n%s", got, d.log())
	}
	log := d.log()
	for _, want := range []string{`capability \"kv\" would not be ready`, `pack \"community.wophost.kvdemo\" would be refused`} {
		if !strings.Contains(log, want) {
			t.Errorf("the refusal does not say %s:\n%s", want, log)
		}
	}
	// kv comes back under the running host: the store still holds the
	// value written before.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := remember("after")
		if succeeded(r.status, r.body) {
			if !strings.Contains(r.body, `"version":2`) {
				t.Fatalf("kv after the refused reload: %s (want version 2 of the key)", r.body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kv did not come back after the refused reload: %d %s\n%s", r.status, r.body, d.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	plugins := request(t, "GET", d.base+"/v1/plugins", "", nil)
	if !strings.Contains(plugins.body, `"name":"kv","plugin"`) || strings.Contains(plugins.body, `"state":"failed"`) {
		t.Fatalf("plugins after the refused reload: %s", plugins.body)
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d:\n%s", code, d.log())
	}
}

// TestChaosReload keeps a steady load of node runs on the stateful kv and
// aiEnvelope plugins through `host serve` while the config is reloaded
// again and again: unchanged, then with kv's and aiEnvelope's config
// changed (both are single-writer: their old process is drained and
// stopped before the new one opens the same store). Requests that start
// while an unchanged config reloads must all succeed; while a changed one
// reloads, a failure may only be a retryable one. No envelope the plugin
// accepted may be lost, and kvdemo is never refused.
// `go test -v -run TestChaosReload ./test/integration/` prints the figures.
func TestChaosReload(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test skipped in -short mode")
	}
	c := startReloadChaos(t)
	c.startLoad()
	if !t.Run("each reload completes under load, replacing exactly the changed plugins", c.reloadInTurn) {
		t.FailNow()
	}
	c.load.halt()

	t.Run("every accepted envelope answers again with the same id", c.envelopesKept)
	t.Run("requests fail only around a changed reload, and then retryably", c.failuresOnlyAroundChanges)
	c.logFigures(t)
	t.Run("envelopes are accepted under load", func(t *testing.T) {
		if len(c.accepted) == 0 {
			t.Error("no envelope was accepted under load")
		}
	})
	t.Run("every kv process opens its store", func(t *testing.T) {
		if strings.Contains(c.d.log(), "timeout") && strings.Contains(c.d.log(), "open store") {
			t.Errorf("a kv process could not open its store:\n%s", c.d.log())
		}
	})
	t.Run("serve exits 0 on SIGTERM", func(t *testing.T) {
		if code := c.d.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit %d:\n%s", code, c.d.log())
		}
	})
}

const (
	// chaosReloads is how many times TestChaosReload reloads, unchanged
	// and changed in turn.
	chaosReloads = 6
	// reloadClients is how many clients load TestChaosReload's host.
	reloadClients = 4
)

// reloadOutcome is one request of TestChaosReload's load.
type reloadOutcome struct {
	start, end time.Time
	status     int
	body       string
}

// reloadChaos is host serve reloaded under load, and what the load saw.
type reloadChaos struct {
	cfg          string
	d            *daemon
	kvPID, aiPID []int // the plugin processes of the moment

	load workers
	// mu guards what the load records.
	mu       sync.Mutex
	outcomes []reloadOutcome
	answered [reloadClients]int // requests each client has had answered
	accepted map[string]string  // idempotency key → envelopeId

	took []time.Duration // per reload, from SIGHUP to "reloaded"
	// windows are the spans of the changed reloads, from SIGHUP to the
	// "reloaded" line.
	windows [][2]time.Time
	lost    int
	// What failed, by the kind of reload it overlapped.
	byPhase                                      map[string]int
	failedUnchanged, failedChanged, notRetryable int
}

// startReloadChaos starts host serve with one kv and one aiEnvelope
// plugin process.
func startReloadChaos(t *testing.T) *reloadChaos {
	t.Helper()
	c := &reloadChaos{cfg: reloadDeployment(t), accepted: map[string]string{}, byPhase: map[string]int{}}
	c.d = startServe(t, c.cfg)
	c.kvPID, c.aiPID = c.plugins()
	if len(c.kvPID) != 1 || len(c.aiPID) != 1 {
		t.Fatalf("kv plugin processes %v, aiEnvelope %v; want one each", c.kvPID, c.aiPID)
	}
	return c
}

// plugins are the kv and aiEnvelope plugin processes of the moment.
func (c *reloadChaos) plugins() (kv, ai []int) {
	return childrenOf(c.d.cmd.Process.Pid, "wophost-kv"), childrenOf(c.d.cmd.Process.Pid, "aienvelope")
}

// generateCall is a probe call of aiEnvelope.generate under key.
func generateCall(key string) string {
	return fmt.Sprintf(`{"family":"aiEnvelope","method":"generate","payload":{"envelopeType":"reload","userMessage":%q,"idempotencyKey":%q}}`, key, key)
}

// startLoad starts the clients: even ones remember values with kvdemo,
// odd ones generate envelopes.
func (c *reloadChaos) startLoad() {
	for w := range reloadClients {
		c.load.loop(func(i int) {
			start := time.Now()
			var status int
			var body, key string
			if w%2 == 0 {
				status, body = c.d.execute("kvdemo.remember", fmt.Sprintf(`{"key":"w%d-%d","value":"v%d"}`, w, i%20, i))
			} else {
				key = fmt.Sprintf("reload-%d-%d", w, i)
				status, body = c.d.execute("probe.call", generateCall(key))
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			c.outcomes = append(c.outcomes, reloadOutcome{start, time.Now(), status, body})
			c.answered[w]++
			if key != "" && succeeded(status, body) {
				var r struct {
					Output struct {
						EnvelopeID string `json:"envelopeId"`
					} `json:"output"`
				}
				if json.Unmarshal([]byte(body), &r) == nil && r.Output.EnvelopeID != "" {
					c.accepted[key] = r.Output.EnvelopeID
				}
			}
		})
	}
}

// loadRuns returns once every client has had two more requests answered,
// whatever their status: the load runs on the host of the moment, before
// a reload and after the last.
func (c *reloadChaos) loadRuns(t *testing.T) {
	c.mu.Lock()
	before := c.answered
	c.mu.Unlock()
	waitUntil(t, "every client to be answered twice more", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for w := range reloadClients {
			if c.answered[w] < before[w]+2 {
				return false
			}
		}
		return true
	})
}

// reloadInTurn reloads unchanged and changed (kv's and aiEnvelope's
// config) in turn, each once the load has run on the host of the moment.
func (c *reloadChaos) reloadInTurn(t *testing.T) {
	for k := range chaosReloads {
		changed := k%2 == 1
		if !changed {
			if !t.Run(fmt.Sprintf("reload %d, unchanged, completes", k), func(t *testing.T) { c.reload(t, k, false) }) {
				t.FailNow()
			}
			t.Run(fmt.Sprintf("reload %d keeps kv and aiEnvelope", k), func(t *testing.T) { c.pluginsKept(t, k) })
			continue
		}
		if !t.Run(fmt.Sprintf("reload %d, with kv and aiEnvelope changed, completes", k), func(t *testing.T) { c.reload(t, k, true) }) {
			t.FailNow()
		}
		t.Run(fmt.Sprintf("reload %d replaces kv and aiEnvelope", k), func(t *testing.T) { c.pluginsReplaced(t, k) })
	}
	t.Run("every client is answered after the last reload", c.loadRuns)
}

// reload lets the load run, then reloads, with kv's and aiEnvelope's
// config changed if changed, and waits for the reload to finish.
func (c *reloadChaos) reload(t *testing.T, k int, changed bool) {
	c.loadRuns(t)
	if changed {
		reloadConfig(t, c.cfg, 65536+k, 2+(k/2)%2)
	}
	t0 := time.Now()
	if got := c.d.reloadAndWait(t, k+1); got != "reloaded" {
		t.Fatalf("reload %d: %s\n%s", k, got, c.d.log())
	}
	c.took = append(c.took, time.Since(t0))
	if changed {
		c.windows = append(c.windows, [2]time.Time{t0, time.Now()})
	}
}

func (c *reloadChaos) pluginsKept(t *testing.T, k int) {
	kvNow, aiNow := c.plugins()
	if fmt.Sprint(kvNow) != fmt.Sprint(c.kvPID) || fmt.Sprint(aiNow) != fmt.Sprint(c.aiPID) {
		t.Errorf("reload %d (unchanged) replaced a plugin: kv %v → %v, aiEnvelope %v → %v", k, c.kvPID, kvNow, c.aiPID, aiNow)
	}
}

func (c *reloadChaos) pluginsReplaced(t *testing.T, k int) {
	kvNow, aiNow := c.plugins()
	if len(kvNow) != 1 || len(aiNow) != 1 || kvNow[0] == c.kvPID[0] || aiNow[0] == c.aiPID[0] {
		t.Errorf("reload %d (changed) left kv %v → %v, aiEnvelope %v → %v; want one new process each", k, c.kvPID, kvNow, c.aiPID, aiNow)
	}
	c.kvPID, c.aiPID = kvNow, aiNow
}

func (c *reloadChaos) envelopesKept(t *testing.T) {
	for key, id := range c.accepted {
		status, body := c.d.execute("probe.call", generateCall(key))
		if !succeeded(status, body) || !strings.Contains(body, id) {
			c.lost++
			if c.lost <= 3 {
				t.Errorf("envelope %s (%s) lost: %d %s", key, id, status, body)
			}
		}
	}
}

// failuresOnlyAroundChanges classes each request by whether it
// overlapped a changed reload: one that did not must have succeeded, one
// that did may only have failed retryably.
func (c *reloadChaos) failuresOnlyAroundChanges(t *testing.T) {
	for _, o := range c.outcomes {
		kind := "unchanged"
		for _, w := range c.windows {
			if o.start.Before(w[1]) && o.end.After(w[0]) {
				kind = "changed"
			}
		}
		if succeeded(o.status, o.body) {
			c.byPhase[kind+" ok"]++
			continue
		}
		c.byPhase[fmt.Sprintf("%s %d", kind, o.status)]++
		if kind == "unchanged" {
			c.failedUnchanged++
			if c.failedUnchanged <= 3 {
				t.Errorf("a request that overlapped no changed reload failed: %d %s", o.status, o.body)
			}
			continue
		}
		c.failedChanged++
		if !strings.Contains(o.body, `"retryable":true`) {
			c.notRetryable++
			if c.notRetryable <= 3 {
				t.Errorf("a request failed around a changed reload without being retryable: %d %s", o.status, o.body)
			}
		}
	}
}

func (c *reloadChaos) logFigures(t *testing.T) {
	took := append([]time.Duration(nil), c.took...)
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("chaos reload: %d reloads (unchanged and changed kv + aiEnvelope in turn) under %d clients; %d requests: %v", chaosReloads, reloadClients, len(c.outcomes), c.byPhase)
	t.Logf("failed around unchanged reloads %d, around changed reloads %d (not retryable %d); accepted envelopes %d, lost %d; reload took p50 %s, max %s",
		c.failedUnchanged, c.failedChanged, c.notRetryable, len(c.accepted), c.lost, took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
}

// execute runs a node through d's HTTP API and returns the status and
// body; a request that got no answer has status 0.
func (d *daemon) execute(typeID, input string) (int, string) {
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Post(d.base+"/v1/nodes/"+typeID+":execute", "application/json", strings.NewReader(`{"input":`+input+`}`))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(body)
}

// workers run load loops until halted.
type workers struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

// loop runs body with 0, 1, 2, … in a goroutine of its own until halt.
func (w *workers) loop(body func(i int)) {
	if w.stop == nil {
		w.stop = make(chan struct{})
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			body(i)
		}
	}()
}

// halt stops every loop and waits for them to return.
func (w *workers) halt() {
	close(w.stop)
	w.wg.Wait()
}
