package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
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
	"github.com/wophost/wophost/test/testbin"
)

// chaosKills is how many times the chaos test kills a plugin, taking the
// aiEnvelope, promptLibrary and agentRuntime plugins in turn.
const chaosKills = 6

// firstRestartBackoff is the host's first delay before it restarts a crashed
// plugin (0.5 s, doubling from there on repeated failed attempts).
const firstRestartBackoff = 500 * time.Millisecond

// children returns the pids of the live processes whose parent is this
// one and whose command line contains name ("" for all of them).
func children(name string) []int {
	self := os.Getpid()
	var out []int
	for _, p := range testbin.Processes() {
		if p.PPID == self && p.State != "Z" && strings.Contains(p.Command, name) {
			out = append(out, p.PID)
		}
	}
	return out
}

func openFDs() int {
	entries, _ := os.ReadDir("/proc/self/fd")
	return len(entries)
}

// TestChaos keeps a steady load of ctx calls from two packs on five
// families while the aiEnvelope, promptLibrary and agentRuntime plugins
// are killed with SIGKILL in turn, again and again. The echo and kv
// families must serve throughout, every family must serve calls between
// kills, each killed family must come back within the first restart
// backoff plus a margin, nothing accepted may be lost (every envelope is
// answered again from the aiEnvelope store with the same id, every
// published prompt resolves to its bytes, every message an agent mailbox
// accepted is recognised again by its key), and nothing may leak.
// `go test -v -run TestChaos ./test/integration/` prints the figures.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test skipped in -short mode")
	}
	goroutinesBefore, fdsBefore := runtime.NumGoroutine(), openFDs()
	c := startChaosHost(t)
	if !t.Run("two agents are spawned", c.spawnAgents) {
		t.FailNow()
	}
	c.startLoad()
	if !t.Run("each killed plugin comes back while every family keeps serving", c.killInTurn) {
		t.FailNow()
	}
	c.load.halt()

	t.Run("every accepted envelope answers again with the same id", c.envelopesKept)
	t.Run("every accepted mailbox message is recognised by its key", c.messagesKept)
	t.Run("the published prompt resolves and verifies", c.promptKept)

	leaks := c.closeHost(goroutinesBefore, fdsBefore)
	c.logFigures(t, leaks)

	t.Run("the families nobody killed never failed", c.unkilledNeverFailed)
	t.Run("the killed families failed only as unavailable or not provided", c.killedFailedOnlyAsUnavailable)
	t.Run("every family served under load", c.everyFamilyServed)
	t.Run("something was accepted to check for loss", c.somethingAccepted)
	t.Run("each plugin came back within the first restart backoff plus a margin", c.recoveredOnFirstRestart)
	t.Run("nothing outlives Close", leaks.check)
}

// chaosRun is the host under chaos, its load and what the load saw.
type chaosRun struct {
	h        *host.Host
	cfg      string
	families []string // the five families under load
	agents   []string // the two agents messages go between

	load workers
	// mu guards what the load records.
	mu           sync.Mutex
	served       map[string]int    // family → calls served
	errorsByCode map[string]int    // "family code" of the killed families → count
	accepted     map[string]string // idempotency key → envelopeId
	messages     map[int]string    // message index → messageId
	echoFailures []string          // failures of the families nobody kills

	recoveries []time.Duration // per kill, in order
	lost       int             // accepted things not found again
}

// startChaosHost lays out the kvdemo pack, publishes the chaos prompt and
// kvdemo's, and starts a host serving five families to two packs.
func startChaosHost(t *testing.T) *chaosRun {
	t.Helper()
	dir := t.TempDir()
	kvdemo := filepath.Join(dir, "kvdemo")
	if err := testbin.LayOutPack("examples/packs/kvdemo", binary(t, "./examples/packs/kvdemo"), kvdemo); err != nil {
		t.Fatal(err)
	}
	prompt := filepath.Join(dir, "chaos.prompt")
	promptText := "---\nname: chaos/system\nversion: 1\n---\nYou are under chaos. Answer anyway.\n"
	if err := os.WriteFile(prompt, []byte(promptText), 0o644); err != nil {
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
capability "kv" {
  plugin = "wophost-kv"
}
capability "ai" {
  plugin = %q
}
capability "prompts" {
  plugin   = %q
  families = ["promptLibrary"]
}
capability "agents" {
  plugin = %q
  config {
    mailbox_capacity = 100000
  }
}
pack "private.wophost.probe" { path = %q }
pack "community.wophost.kvdemo" { path = %q }
`, binary(t, "./plugins/aienvelope"), binary(t, "./plugins/promptlib"), binary(t, "./plugins/agentrt"), probePack(t), kvdemo))
	// kvdemo's pinned prompt too: a pack whose pin the store does not
	// hold is refused at load.
	if res := runHost(t, "", "--config", cfg, "prompts", "publish", prompt, testbin.SourceDir("examples/prompts/kvdemo-describe.prompt")); res.code != 0 {
		t.Fatalf("publish: %s%s", res.stdout, res.stderr)
	}
	return &chaosRun{
		h:            startHost(t, cfg),
		cfg:          cfg,
		families:     []string{"test.echo", "acme.kv", "aiEnvelope", "promptLibrary", "agentRuntime"},
		agents:       make([]string, 2),
		served:       map[string]int{},
		errorsByCode: map[string]int{},
		accepted:     map[string]string{},
		messages:     map[int]string{},
	}
}

// call makes one ctx call from the probe pack.
func (c *chaosRun) call(family, method, payload string) (json.RawMessage, error) {
	in := fmt.Sprintf(`{"family":%q,"method":%q,"payload":%s}`, family, method, payload)
	res, err := c.h.Run(context.Background(), "probe.call", json.RawMessage(in), host.RunOptions{Timeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	return res.Output, nil
}

// message is the i-th message from the first agent to the second.
func (c *chaosRun) message(i int) string {
	return fmt.Sprintf(`{"fromAgentId":%q,"toAgentId":%q,"channel":"chaos","content":{"n":%d},"idempotencyKey":"msg-%d"}`, c.agents[0], c.agents[1], i, i)
}

// envelopeRequest is the generate request the load sends with key.
func envelopeRequest(i int, key string) string {
	return fmt.Sprintf(`{"envelopeType":"chaos","userMessage":"n %d","idempotencyKey":%q}`, i, key)
}

func (c *chaosRun) spawnAgents(t *testing.T) {
	for i := range c.agents {
		manifest := fmt.Sprintf(`{"id":"chaos-%d","name":"Chaos %d","description":"takes messages","systemPromptRef":"chaos/system@1","toolAllowlist":[]}`, i, i)
		out, err := c.call("agentRuntime", "spawn", fmt.Sprintf(`{"manifest":%s,"idempotencyKey":"spawn-%d"}`, manifest, i))
		var r struct {
			AgentInstanceID string `json:"agentInstanceId"`
		}
		if err != nil || json.Unmarshal(out, &r) != nil || r.AgentInstanceID == "" {
			t.Fatalf("spawn %d: %s %v", i, out, err)
		}
		c.agents[i] = r.AgentInstanceID
	}
}

// startLoad starts five workers: kvdemo storing values, messages between
// the agents, and three probe workers each calling echo, a pinned prompt
// and an envelope.
func (c *chaosRun) startLoad() {
	// The second pack: kvdemo stores values through acme.kv, never killed.
	c.load.loop(func(i int) {
		in := fmt.Sprintf(`{"key":"k%d","value":"v%d"}`, i%10, i)
		_, err := c.h.Run(context.Background(), "kvdemo.remember", json.RawMessage(in), host.RunOptions{Timeout: 30 * time.Second})
		c.mu.Lock()
		defer c.mu.Unlock()
		if err != nil {
			c.echoFailures = append(c.echoFailures, "kvdemo.remember: "+err.Error())
		} else {
			c.served["acme.kv"]++
		}
	})
	// Messages between the two agents, into a durable mailbox.
	c.load.loop(func(i int) {
		out, err := c.call("agentRuntime", "messageSend", c.message(i))
		var r struct {
			MessageID string `json:"messageId"`
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if err != nil {
			c.errorsByCode["agentRuntime "+wop.CodeOf(err)]++
		} else if json.Unmarshal(out, &r) == nil && r.MessageID != "" {
			c.messages[i] = r.MessageID
			c.served["agentRuntime"]++
		}
	})
	for w := range 3 {
		c.load.loop(func(i int) { c.probeWorker(w, i) })
	}
}

// probeWorker is the i-th round of probe worker w: echo, a pinned prompt,
// an envelope.
func (c *chaosRun) probeWorker(w, i int) {
	_, echoErr := c.call("test.echo", "echo", `{"w":1}`)
	prompt, promptErr := c.call("promptLibrary", "get", `{"promptId":"chaos/system@1"}`)
	key := fmt.Sprintf("chaos-%d-%d", w, i)
	envelope, aiErr := c.call("aiEnvelope", "generate", envelopeRequest(i, key))
	var r struct {
		EnvelopeID string `json:"envelopeId"`
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if echoErr != nil {
		c.echoFailures = append(c.echoFailures, echoErr.Error())
	} else {
		c.served["test.echo"]++
	}
	if promptErr != nil {
		c.errorsByCode["promptLibrary "+wop.CodeOf(promptErr)]++
	} else if strings.Contains(string(prompt), "You are under chaos.") {
		c.served["promptLibrary"]++
	}
	if aiErr != nil {
		c.errorsByCode["aiEnvelope "+wop.CodeOf(aiErr)]++
	} else if json.Unmarshal(envelope, &r) == nil && r.EnvelopeID != "" {
		c.accepted[key] = r.EnvelopeID
		c.served["aiEnvelope"]++
	}
}

// killInTurn kills the aiEnvelope, promptLibrary and agentRuntime plugins
// in turn, each once every family has served calls since the last kill,
// and waits for each to serve again.
func (c *chaosRun) killInTurn(t *testing.T) {
	for k := range chaosKills {
		target, up := c.killTarget(k)
		if !t.Run(fmt.Sprintf("kill %d of %s", k, target), func(t *testing.T) {
			c.progressed(t, k)
			c.killAndRecover(t, k, target, up)
		}) {
			t.FailNow()
		}
	}
	t.Run("every family serves after the last kill", func(t *testing.T) { c.progressed(t, chaosKills) })
}

// killTarget is the plugin kill k takes and the call that succeeds once it
// is back, from pack code.
func (c *chaosRun) killTarget(k int) (string, func() error) {
	switch k % 3 {
	case 1:
		return "promptlib", func() error {
			_, err := c.call("promptLibrary", "get", `{"promptId":"chaos/system@1"}`)
			return err
		}
	case 2:
		return "agentrt", func() error {
			_, err := c.call("agentRuntime", "messageSend", fmt.Sprintf(`{"fromAgentId":%q,"toAgentId":%q,"channel":"up","content":1,"idempotencyKey":"up-%d-%d"}`, c.agents[0], c.agents[1], k, time.Now().UnixNano()))
			return err
		}
	}
	return "aienvelope", func() error {
		_, err := c.call("aiEnvelope", "generate", fmt.Sprintf(`{"envelopeType":"probe","userMessage":"up?","idempotencyKey":"probe-%d-%d"}`, k, time.Now().UnixNano()))
		return err
	}
}

// progressed waits until every family has served calls since it was
// called: the load is running on all five, whatever the machine's speed.
func (c *chaosRun) progressed(t *testing.T, k int) {
	c.mu.Lock()
	since := maps.Clone(c.served)
	c.mu.Unlock()
	deadline := time.Now().Add(time.Minute)
	for {
		c.mu.Lock()
		var idle []string
		for _, f := range c.families {
			if c.served[f] <= since[f] {
				idle = append(idle, f)
			}
		}
		c.mu.Unlock()
		if len(idle) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.mu.Lock()
			errs := maps.Clone(c.errorsByCode)
			c.mu.Unlock()
			t.Fatalf("before kill %d: no call of %v served within a minute (errors of killed families: %v)", k, idle, errs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killAndRecover kills target's one process with SIGKILL and records how
// long until up succeeds again.
func (c *chaosRun) killAndRecover(t *testing.T, k int, target string, up func() error) {
	pids := children(target)
	if len(pids) != 1 {
		t.Fatalf("kill %d: %s plugin processes %v, want one", k, target, pids)
	}
	killed := time.Now()
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := killed.Add(time.Minute)
	for up() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("kill %d: %s did not come back within a minute", k, target)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.recoveries = append(c.recoveries, time.Since(killed))
}

func (c *chaosRun) envelopesKept(t *testing.T) {
	for key, id := range c.accepted {
		parts := strings.Split(key, "-")
		i, _ := strconv.Atoi(parts[len(parts)-1])
		out, err := c.call("aiEnvelope", "generate", envelopeRequest(i, key))
		var r struct {
			EnvelopeID string `json:"envelopeId"`
		}
		if err != nil || json.Unmarshal(out, &r) != nil || r.EnvelopeID != id {
			c.lost++
			t.Errorf("envelope %s (%s) lost: %s %v", key, id, out, err)
		}
	}
}

func (c *chaosRun) messagesKept(t *testing.T) {
	for i, id := range c.messages {
		out, err := c.call("agentRuntime", "messageSend", c.message(i))
		var r struct {
			MessageID string `json:"messageId"`
		}
		if err != nil || json.Unmarshal(out, &r) != nil || r.MessageID != id {
			c.lost++
			t.Errorf("message %d (%s) lost: %s %v", i, id, out, err)
		}
	}
}

// promptKept checks that the published version resolves to the same bytes
// and that verify finds nothing wrong.
func (c *chaosRun) promptKept(t *testing.T) {
	if out, err := c.call("promptLibrary", "get", `{"promptId":"chaos/system@1"}`); err != nil || !strings.Contains(string(out), "Answer anyway.") {
		c.lost++
		t.Errorf("the published prompt after the kills: %s %v", out, err)
	}
	if res := runHost(t, "", "--config", c.cfg, "prompts", "verify"); res.code != 0 {
		t.Errorf("prompts verify after the kills: %s%s", res.stdout, res.stderr)
	}
}

// chaosLeaks is what outlived the host's Close.
type chaosLeaks struct {
	procs, goroutines, fds int
}

// closeHost closes the host, gives its processes and goroutines ten
// seconds to go, and measures what is left against the counts before.
func (c *chaosRun) closeHost(goroutinesBefore, fdsBefore int) chaosLeaks {
	c.h.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && (len(children("")) > 0 || runtime.NumGoroutine() > goroutinesBefore+5) {
		time.Sleep(50 * time.Millisecond)
	}
	return chaosLeaks{procs: len(children("")), goroutines: runtime.NumGoroutine() - goroutinesBefore, fds: openFDs() - fdsBefore}
}

func (l chaosLeaks) check(t *testing.T) {
	if l.procs > 0 {
		t.Errorf("%d processes outlived Close", l.procs)
	}
	if l.goroutines > 5 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines more than before the host started:\n%s", l.goroutines, buf[:runtime.Stack(buf, true)])
	}
	if l.fds > 3 {
		t.Errorf("%d file descriptors more than before the host started", l.fds)
	}
}

func (c *chaosRun) logFigures(t *testing.T, leaks chaosLeaks) {
	recoveries := slices.Clone(c.recoveries)
	slices.Sort(recoveries)
	t.Logf("chaos: %d kills (aiEnvelope, promptLibrary and agentRuntime in turn) under load from two packs, five workers", chaosKills)
	t.Logf("calls served: test.echo %d, acme.kv %d, aiEnvelope %d, promptLibrary %d, agentRuntime %d; failures of unkilled families %d; errors of killed families by code %v",
		c.served["test.echo"], c.served["acme.kv"], c.served["aiEnvelope"], c.served["promptLibrary"], c.served["agentRuntime"], len(c.echoFailures), c.errorsByCode)
	t.Logf("recovery after a kill: p50 %s, max %s", recoveries[len(recoveries)/2].Round(time.Millisecond), recoveries[len(recoveries)-1].Round(time.Millisecond))
	t.Logf("accepted envelopes %d, messages %d, lost %d; after Close: processes left %d, goroutines %+d, file descriptors %+d",
		len(c.accepted), len(c.messages), c.lost, leaks.procs, leaks.goroutines, leaks.fds)
}

func (c *chaosRun) unkilledNeverFailed(t *testing.T) {
	if len(c.echoFailures) > 0 {
		t.Errorf("families nobody killed failed: %v", c.echoFailures[:min(3, len(c.echoFailures))])
	}
}

func (c *chaosRun) killedFailedOnlyAsUnavailable(t *testing.T) {
	for fc := range c.errorsByCode {
		_, code, _ := strings.Cut(fc, " ")
		if code != wop.CodeUnavailable && code != wop.CodeCapabilityNotProvided {
			t.Errorf("%s during the kills; want only unavailable or capability_not_provided", fc)
		}
	}
}

func (c *chaosRun) everyFamilyServed(t *testing.T) {
	for _, f := range c.families {
		if c.served[f] == 0 {
			t.Errorf("no %s call succeeded under load", f)
		}
	}
}

func (c *chaosRun) somethingAccepted(t *testing.T) {
	if len(c.accepted) == 0 || len(c.messages) == 0 {
		t.Errorf("nothing accepted to check for loss: %d envelopes, %d mailbox messages", len(c.accepted), len(c.messages))
	}
}

// recoveredOnFirstRestart bounds each recovery. A killed plugin is
// restarted after the first step of the backoff; the margin covers
// starting its process, its handshake and configuration and the call that
// sees it back on a loaded machine, which take well under a second
// unloaded: a recovery past it is a restart that did not happen on the
// first attempt, not a slow machine.
func (c *chaosRun) recoveredOnFirstRestart(t *testing.T) {
	const recoveryBound = firstRestartBackoff + 10*time.Second
	for k, r := range c.recoveries {
		if r > recoveryBound {
			t.Errorf("kill %d: the plugin came back after %s, over the first restart backoff (%s) plus a 10 s margin", k, r.Round(time.Millisecond), firstRestartBackoff)
		}
	}
}
