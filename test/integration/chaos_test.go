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
	if res := runHost(t, "", "--config", cfg, "prompts", "publish", prompt); res.code != 0 {
		t.Fatalf("publish: %s%s", res.stdout, res.stderr)
	}
	h := startHost(t, cfg)

	call := func(family, method, payload string) (json.RawMessage, error) {
		in := fmt.Sprintf(`{"family":%q,"method":%q,"payload":%s}`, family, method, payload)
		res, err := h.Run(context.Background(), "probe.call", json.RawMessage(in), host.RunOptions{Timeout: 30 * time.Second})
		if err != nil {
			return nil, err
		}
		return res.Output, nil
	}

	// Two agents to send messages between.
	agents := make([]string, 2)
	for i := range agents {
		manifest := fmt.Sprintf(`{"id":"chaos-%d","name":"Chaos %d","description":"takes messages","systemPromptRef":"chaos/system@1","toolAllowlist":[]}`, i, i)
		out, err := call("agentRuntime", "spawn", fmt.Sprintf(`{"manifest":%s,"idempotencyKey":"spawn-%d"}`, manifest, i))
		var r struct {
			AgentInstanceID string `json:"agentInstanceId"`
		}
		if err != nil || json.Unmarshal(out, &r) != nil || r.AgentInstanceID == "" {
			t.Fatalf("spawn %d: %s %v", i, out, err)
		}
		agents[i] = r.AgentInstanceID
	}
	message := func(i int) string {
		return fmt.Sprintf(`{"fromAgentId":%q,"toAgentId":%q,"channel":"chaos","content":{"n":%d},"idempotencyKey":"msg-%d"}`, agents[0], agents[1], i, i)
	}
	messages := map[int]string{} // index → messageId

	var mu sync.Mutex
	served := map[string]int{}
	errorsByCode := map[string]int{}
	accepted := map[string]string{} // idempotency key → envelopeId
	var echoFailures []string       // failures of the families nobody kills

	var load workers
	worker := load.loop
	// The second pack: kvdemo stores values through acme.kv, never killed.
	worker(func(i int) {
		in := fmt.Sprintf(`{"key":"k%d","value":"v%d"}`, i%10, i)
		_, err := h.Run(context.Background(), "kvdemo.remember", json.RawMessage(in), host.RunOptions{Timeout: 30 * time.Second})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			echoFailures = append(echoFailures, "kvdemo.remember: "+err.Error())
		} else {
			served["acme.kv"]++
		}
	})
	// Messages between the two agents, into a durable mailbox.
	worker(func(i int) {
		out, err := call("agentRuntime", "messageSend", message(i))
		var r struct {
			MessageID string `json:"messageId"`
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errorsByCode["agentRuntime "+wop.CodeOf(err)]++
		} else if json.Unmarshal(out, &r) == nil && r.MessageID != "" {
			messages[i] = r.MessageID
			served["agentRuntime"]++
		}
	})
	// Three workers in the probe pack: echo, a pinned prompt, an envelope.
	for w := range 3 {
		worker(func(i int) {
			_, echoErr := call("test.echo", "echo", `{"w":1}`)
			prompt, promptErr := call("promptLibrary", "get", `{"promptId":"chaos/system@1"}`)
			key := fmt.Sprintf("chaos-%d-%d", w, i)
			envelope, aiErr := call("aiEnvelope", "generate", fmt.Sprintf(`{"envelopeType":"chaos","userMessage":"n %d","idempotencyKey":%q}`, i, key))
			var r struct {
				EnvelopeID string `json:"envelopeId"`
			}
			mu.Lock()
			defer mu.Unlock()
			if echoErr != nil {
				echoFailures = append(echoFailures, echoErr.Error())
			} else {
				served["test.echo"]++
			}
			if promptErr != nil {
				errorsByCode["promptLibrary "+wop.CodeOf(promptErr)]++
			} else if strings.Contains(string(prompt), "You are under chaos.") {
				served["promptLibrary"]++
			}
			if aiErr != nil {
				errorsByCode["aiEnvelope "+wop.CodeOf(aiErr)]++
			} else if json.Unmarshal(envelope, &r) == nil && r.EnvelopeID != "" {
				accepted[key] = r.EnvelopeID
				served["aiEnvelope"]++
			}
		})
	}

	// Before each kill, every family has served calls since the last one:
	// the load is running on all five, whatever the machine's speed.
	families := []string{"test.echo", "acme.kv", "aiEnvelope", "promptLibrary", "agentRuntime"}
	progressed := func(k int) {
		mu.Lock()
		since := maps.Clone(served)
		mu.Unlock()
		deadline := time.Now().Add(time.Minute)
		for {
			mu.Lock()
			var idle []string
			for _, f := range families {
				if served[f] <= since[f] {
					idle = append(idle, f)
				}
			}
			mu.Unlock()
			if len(idle) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("before kill %d: no call of %v served within a minute (errors of killed families: %v)", k, idle, errorsByCode)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	var recoveries []time.Duration
	for k := range chaosKills {
		progressed(k)
		// Recovered when a call from pack code succeeds again.
		target, up := "aienvelope", func() error {
			_, err := call("aiEnvelope", "generate", fmt.Sprintf(`{"envelopeType":"probe","userMessage":"up?","idempotencyKey":"probe-%d-%d"}`, k, time.Now().UnixNano()))
			return err
		}
		switch k % 3 {
		case 1:
			target, up = "promptlib", func() error {
				_, err := call("promptLibrary", "get", `{"promptId":"chaos/system@1"}`)
				return err
			}
		case 2:
			target, up = "agentrt", func() error {
				_, err := call("agentRuntime", "messageSend", fmt.Sprintf(`{"fromAgentId":%q,"toAgentId":%q,"channel":"up","content":1,"idempotencyKey":"up-%d-%d"}`, agents[0], agents[1], k, time.Now().UnixNano()))
				return err
			}
		}
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
		recoveries = append(recoveries, time.Since(killed))
	}
	progressed(chaosKills)
	load.halt()

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

	// The mailboxes lost nothing: every accepted message is recognised by
	// its key and answers with the same id.
	for i, id := range messages {
		out, err := call("agentRuntime", "messageSend", message(i))
		var r struct {
			MessageID string `json:"messageId"`
		}
		if err != nil || json.Unmarshal(out, &r) != nil || r.MessageID != id {
			lost++
			t.Errorf("message %d (%s) lost: %s %v", i, id, out, err)
		}
	}
	// The prompt store lost nothing either: the published version resolves
	// to the same bytes, and verify finds nothing wrong.
	if out, err := call("promptLibrary", "get", `{"promptId":"chaos/system@1"}`); err != nil || !strings.Contains(string(out), "Answer anyway.") {
		lost++
		t.Errorf("the published prompt after the kills: %s %v", out, err)
	}
	if res := runHost(t, "", "--config", cfg, "prompts", "verify"); res.code != 0 {
		t.Errorf("prompts verify after the kills: %s%s", res.stdout, res.stderr)
	}

	h.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && (len(children("")) > 0 || runtime.NumGoroutine() > goroutinesBefore+5) {
		time.Sleep(50 * time.Millisecond)
	}
	procsLeft, goroutineLeak, fdLeak := len(children("")), runtime.NumGoroutine()-goroutinesBefore, openFDs()-fdsBefore

	recoveriesInOrder := slices.Clone(recoveries)
	slices.Sort(recoveries)
	t.Logf("chaos: %d kills (aiEnvelope, promptLibrary and agentRuntime in turn) under load from two packs, five workers", chaosKills)
	t.Logf("calls served: test.echo %d, acme.kv %d, aiEnvelope %d, promptLibrary %d, agentRuntime %d; failures of unkilled families %d; errors of killed families by code %v",
		served["test.echo"], served["acme.kv"], served["aiEnvelope"], served["promptLibrary"], served["agentRuntime"], len(echoFailures), errorsByCode)
	t.Logf("recovery after a kill: p50 %s, max %s", recoveries[len(recoveries)/2].Round(time.Millisecond), recoveries[len(recoveries)-1].Round(time.Millisecond))
	t.Logf("accepted envelopes %d, messages %d, lost %d; after Close: processes left %d, goroutines %+d, file descriptors %+d",
		len(keys), len(messages), lost, procsLeft, goroutineLeak, fdLeak)

	if len(echoFailures) > 0 {
		t.Errorf("families nobody killed failed: %v", echoFailures[:min(3, len(echoFailures))])
	}
	for fc := range errorsByCode {
		_, code, _ := strings.Cut(fc, " ")
		if code != wop.CodeUnavailable && code != wop.CodeCapabilityNotProvided {
			t.Errorf("%s during the kills; want only unavailable or capability_not_provided", fc)
		}
	}
	for _, f := range families {
		if served[f] == 0 {
			t.Errorf("no %s call succeeded under load", f)
		}
	}
	if len(keys) == 0 || len(messages) == 0 {
		t.Errorf("nothing accepted to check for loss: %d envelopes, %d mailbox messages", len(keys), len(messages))
	}
	// A killed plugin is restarted after the first step of the backoff; the
	// margin covers starting its process, its handshake and configuration
	// and the call that sees it back on a loaded machine, which take well
	// under a second unloaded: a recovery past it is a restart that did not
	// happen on the first attempt, not a slow machine.
	const recoveryBound = firstRestartBackoff + 10*time.Second
	for k, r := range recoveriesInOrder {
		if r > recoveryBound {
			t.Errorf("kill %d: the plugin came back after %s, over the first restart backoff (%s) plus a 10 s margin", k, r.Round(time.Millisecond), firstRestartBackoff)
		}
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
