package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

// spawnQuota is the agent runtime's spawn_quota in the shared deployment:
// one bound for all hosts together.
const spawnQuota = 4

// cluster is three `host serve` processes, A, B and C, each with its own
// state directory, sharing one PostgreSQL database.
type cluster struct {
	cfgs     map[string]string // host name → config path
	hosts    map[string]*daemon
	provider *capture
	// slow is a second provider whose answers wait for its gate, so that
	// a job can hold a host's only worker.
	slow *chatServer
	// listenerPin is the pinned system prompt of the listener agent.
	listenerPin string
	gateOnce    sync.Once
}

// clusterConfig is one host's config: the storage block naming the shared
// database, promptLibrary, aiEnvelope (two OpenAI-compatible providers
// served by the test, async jobs with a short lease), agentRuntime,
// test.echo, the probe pack and the shared pack. Its sixth argument is
// the host's async job_workers.
const clusterConfig = `
host {
  plugin_dir = %[1]q
  state_dir  = %[2]q
  http {
    listen = "127.0.0.1:0"
  }
  storage {
    backend = "postgres"
    dsn     = %[3]q
  }
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "prompts" {
  plugin   = %[4]q
  families = ["promptLibrary"]
}
capability "ai" {
  plugin = %[5]q
  config {
    default_provider = "chat"
    async {
      enabled     = true
      job_workers = %[6]d
      job_lease   = "3s"
    }
    provider "chat" {
      type     = "openai"
      base_url = "%[7]s/v1"
      model    = "fixture-model"
    }
    provider "slow" {
      type     = "openai"
      base_url = "%[12]s/v1"
      model    = "fixture-model"
    }
  }
}
capability "rt" {
  plugin = %[8]q
  config {
    spawn_quota = %[9]d
  }
}
pack "private.wophost.probe" { path = %[10]q }
pack "private.test.shared" { path = %[11]q }
`

// sharedPack lays out the agentpack binary as a pack with one node,
// shared.call (one ctx call, like probe.call), that declares aiEnvelope
// with its await facet and agentRuntime, and installs the listener agent
// pinned to pin.
func sharedPack(t *testing.T, pin string) string {
	t.Helper()
	return openWOPPack(t, fmt.Sprintf(`{"name":"private.test.shared","version":"1.0.0","kind":"node","engines":{"openwop":">=2.0 <3.0.0"},
  "runtime":{"language":"go","entry":"agentpack"},
  "peerDependencies":{"aiEnvelope":"required","agentRuntime":"required"},
  "peerDependenciesMeta":{"aiEnvelope":{"facets":["await"]}},
  "nodes":[{"typeId":"shared.call","version":"1.0.0","category":"data","role":"pure"}],
  "agents":[{"id":"listener","name":"listener","description":"Reads its mail.","systemPromptRef":%q,"toolAllowlist":[]}]}`, pin),
		map[string]string{})
}

// newCluster writes the three configs on one fresh database, publishes
// the listener's prompt through A's config (a pack's agents resolve their
// pins at load) and starts the three hosts.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	dsn := pgtest.DSN(t)
	c := &cluster{cfgs: map[string]string{}, hosts: map[string]*daemon{}, provider: newCapture(t), slow: newChatServer(t, true)}
	// Runs before the server's own cleanup, which waits for the answers
	// held at the gate.
	t.Cleanup(c.openGate)
	const listenerPrompt = "---\nname: cluster/listener\nversion: 1\n---\nYou are the listener.\n"
	c.listenerPin = "cluster/listener@1#" + promptlibrary.DigestOf([]byte(listenerPrompt))
	probe, shared := probePack(t), sharedPack(t, c.listenerPin)
	for _, name := range []string{"a", "b", "c"} {
		// A runs one async job at a time: a job held at the slow
		// provider keeps the next one it accepts waiting, and leased to A.
		workers := 2
		if name == "a" {
			workers = 1
		}
		dir := t.TempDir()
		text := fmt.Sprintf(clusterConfig, bin.dir, filepath.Join(dir, "state"), dsn,
			binary(t, "./plugins/promptlib"), binary(t, "./plugins/aienvelope"), workers, c.provider.URL,
			binary(t, "./plugins/agentrt"), spawnQuota, probe, shared, c.slow.URL)
		c.cfgs[name] = filepath.Join(dir, name+".hcl")
		if err := os.WriteFile(c.cfgs[name], []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if res := runHost(t, "", "--config", c.cfgs["a"], "prompts", "publish", writePrompt(t, listenerPrompt)); res.code != 0 {
		t.Fatalf("publish the listener's prompt: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := map[string]string{}
	for _, name := range []string{"a", "b", "c"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := startServeQuietly(c.cfgs[name])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures[name] = err.Error()
				return
			}
			c.hosts[name] = d
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, d := range c.hosts {
			if d.cmd.ProcessState == nil {
				_ = d.cmd.Process.Kill()
				_ = d.cmd.Wait()
			}
		}
	})
	if len(failures) > 0 {
		t.Fatalf("hosts that did not start: %v", failures)
	}
	return c
}

// openGate lets the slow provider answer, once and for all.
func (c *cluster) openGate() {
	c.gateOnce.Do(func() { close(c.slow.gate) })
}

// startServeQuietly is startServe for a goroutine other than the test's:
// it reports a failure instead of failing the test. The caller stops the
// process.
func startServeQuietly(cfg string) (*daemon, error) {
	d := &daemon{cmd: exec.Command(bin.host, "--config", cfg, "serve"), done: make(chan struct{})}
	pipe, err := d.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	addr := make(chan string, 1)
	go func() {
		defer close(d.done)
		buf := make([]byte, 32<<10)
		var line bytes.Buffer
		for {
			n, err := pipe.Read(buf)
			d.mu.Lock()
			d.stderr.Write(buf[:n])
			d.mu.Unlock()
			line.Write(buf[:n])
			for {
				i := bytes.IndexByte(line.Bytes(), '\n')
				if i < 0 {
					break
				}
				if m := servingLine.FindSubmatch(line.Next(i + 1)); m != nil {
					addr <- string(m[1])
				}
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case a := <-addr:
		d.base = "http://" + a
		return d, nil
	case <-d.done:
		_ = d.cmd.Wait()
		return nil, fmt.Errorf("%s: host serve exited before listening:\n%s", cfg, d.log())
	case <-time.After(2 * time.Minute):
		_ = d.cmd.Process.Kill()
		<-d.done
		_ = d.cmd.Wait()
		return nil, fmt.Errorf("%s: host serve did not listen within two minutes:\n%s", cfg, d.log())
	}
}

// outcome is the body of POST /v1/nodes/{node}:execute: the node's output,
// or its failure.
type outcome struct {
	RunID  string          `json:"runId"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output"`
	Error  struct {
		Code string `json:"code"`
	} `json:"error"`
}

// call runs node on host name through the HTTP API with a {family, method,
// payload} input and returns the outcome; anything but 200 fails the test.
func (c *cluster) call(t *testing.T, name, node, family, method string, payload any) outcome {
	t.Helper()
	body, err := json.Marshal(map[string]any{"input": map[string]any{"family": family, "method": method, "payload": payload}})
	if err != nil {
		t.Fatal(err)
	}
	r := request(t, "POST", c.hosts[name].base+"/v1/nodes/"+node+":execute", string(body), nil)
	var out outcome
	if err := json.Unmarshal([]byte(r.body), &out); r.status != 200 || err != nil {
		t.Fatalf("%s on host %s: %d %s", node, name, r.status, r.body)
	}
	return out
}

// nodeSucceeded decodes a successful outcome's output into v.
func nodeSucceeded(t *testing.T, what string, out outcome, v any) {
	t.Helper()
	if out.Status == "failed" || out.Error.Code != "" {
		t.Fatalf("%s failed: %s", what, out.Error.Code)
	}
	if v != nil {
		if err := json.Unmarshal(out.Output, v); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out.Output)
		}
	}
}

// hostCommand is one run of the host binary from any goroutine.
func hostCommand(args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.host, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		res.code, res.stderr = -1, err.Error()
	}
	return res
}

// countContaining counts the provider requests whose body contains s.
func (c *capture) countContaining(s string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, b := range c.bodies {
		if strings.Contains(b, s) {
			n++
		}
	}
	return n
}

// Three hosts on one database serve one state: prompts published through
// one are served by the others, concurrent publishes leave one version,
// a message sent through one host is delivered once through another, the
// spawn quota bounds all hosts together, a run recorded on one replays on
// another, and an async job accepted by a host that then dies is run by
// another and awaited through a third, calling the provider once.
func TestSeveralHosts(t *testing.T) {
	c := newCluster(t)
	names := []string{"a", "b", "c"}

	t.Run("a prompt published through A is served byte-identical by B and C", func(t *testing.T) {
		raw := "---\nname: cluster/greeting\nversion: 1\n---\nBonjour — «ça va» 🙂   \r\nline two\n"
		res := runHost(t, "", "--config", c.cfgs["a"], "prompts", "publish", writePrompt(t, raw))
		if res.code != 0 {
			t.Fatalf("publish through A: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		for _, name := range []string{"b", "c"} {
			var p promptlibrary.Prompt
			nodeSucceeded(t, "promptLibrary.get on "+name, c.call(t, name, "probe.call", "promptLibrary", "get", map[string]string{"promptId": "cluster/greeting@1"}), &p)
			if p.Raw != raw || p.Digest != promptlibrary.DigestOf([]byte(raw)) {
				t.Errorf("host %s served %q (%s), want the published bytes", name, p.Raw, p.Digest)
			}
		}
	})

	t.Run("concurrent publishes of one version through every host leave one version", func(t *testing.T) {
		const writers = 8
		publishAll := func(body func(i int) string) []result {
			files := make([]string, writers)
			for i := range files {
				files[i] = writePrompt(t, body(i))
			}
			results := make([]result, writers)
			var wg sync.WaitGroup
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i] = hostCommand("--config", c.cfgs[names[i%len(names)]], "prompts", "publish", files[i])
				}()
			}
			wg.Wait()
			return results
		}
		same := "---\nname: cluster/race\nversion: 1\n---\nThe same body.\n"
		for i, r := range publishAll(func(int) string { return same }) {
			if r.code != 0 {
				t.Errorf("identical publish %d through %s: exit %d\n%s%s", i, names[i%len(names)], r.code, r.stdout, r.stderr)
			}
		}
		bodies := func(i int) string {
			return fmt.Sprintf("---\nname: cluster/race\nversion: 2\n---\nBody number %d.\n", i)
		}
		var winners []int
		for i, r := range publishAll(bodies) {
			switch {
			case r.code == 0:
				winners = append(winners, i)
			case r.code != 1 || !strings.Contains(r.stderr, "already exists"):
				t.Errorf("conflicting publish %d: exit %d, want 0 or the conflict\n%s%s", i, r.code, r.stdout, r.stderr)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("conflicting publishes that succeeded: %v, want exactly one", winners)
		}
		list := runHost(t, "", "--config", c.cfgs["b"], "--json", "prompts", "list", "cluster/race")
		var versions []json.RawMessage
		if err := json.Unmarshal([]byte(list.stdout), &versions); err != nil || len(versions) != 2 {
			t.Fatalf("versions of cluster/race: %d (%v), want 2\n%s", len(versions), err, list.stdout)
		}
		for _, name := range names {
			for ref, want := range map[string]string{"cluster/race@1": same, "cluster/race@2": bodies(winners[0])} {
				var p promptlibrary.Prompt
				nodeSucceeded(t, "get "+ref, c.call(t, name, "probe.call", "promptLibrary", "get", map[string]string{"promptId": ref}), &p)
				if p.Raw != want {
					t.Errorf("host %s serves %s as %q, want %q", name, ref, p.Raw, want)
				}
			}
		}
	})

	t.Run("a message sent through A is delivered once through B", func(t *testing.T) {
		var sp agentruntime.SpawnResult
		nodeSucceeded(t, "spawn on A", c.call(t, "a", "shared.call", "agentRuntime", "spawn",
			agentruntime.SpawnRequest{ManifestID: "listener", IdempotencyKey: "cluster-listener"}), &sp)
		// The same key through another host names the same instance.
		var again agentruntime.SpawnResult
		nodeSucceeded(t, "spawn again on C", c.call(t, "c", "shared.call", "agentRuntime", "spawn",
			agentruntime.SpawnRequest{ManifestID: "listener", IdempotencyKey: "cluster-listener"}), &again)
		if again.AgentInstanceID != sp.AgentInstanceID {
			t.Fatalf("one spawn key gave %s on A and %s on C", sp.AgentInstanceID, again.AgentInstanceID)
		}
		send := agentruntime.MessageSendRequest{FromAgentID: "operator", ToAgentID: sp.AgentInstanceID, Channel: "inbox",
			Content: json.RawMessage(`"mail-7f3a: the build is green"`), IdempotencyKey: "cluster-mail-1"}
		var sent, resent agentruntime.MessageSendResult
		nodeSucceeded(t, "messageSend on A", c.call(t, "a", "shared.call", "agentRuntime", "messageSend", send), &sent)
		// A resend through another host answers the first message.
		nodeSucceeded(t, "messageSend again on C", c.call(t, "c", "shared.call", "agentRuntime", "messageSend", send), &resent)
		if resent.MessageID != sent.MessageID {
			t.Fatalf("resend through C: message %s, want %s", resent.MessageID, sent.MessageID)
		}

		delegate := func(name, task string) {
			t.Helper()
			var res agentruntime.DelegateResult
			nodeSucceeded(t, "delegate on "+name, c.call(t, name, "shared.call", "agentRuntime", "delegate",
				agentruntime.DelegateRequest{Task: json.RawMessage(fmt.Sprintf("%q", task)), Agents: []string{sp.AgentInstanceID}}), &res)
			if res.SelectedAgentID != sp.AgentInstanceID || string(res.Output) != `"ok"` {
				t.Fatalf("delegate on %s: %+v output %s", name, res, res.Output)
			}
		}
		delegate("b", "task-one: read your mail")
		if n := c.provider.countContaining("mail-7f3a"); n != 1 {
			t.Fatalf("the listener was shown the message %d times by the task on B, want once", n)
		}
		delegate("c", "task-two: anything new?")
		if n := c.provider.countContaining("mail-7f3a"); n != 1 {
			t.Errorf("the message was delivered %d times after a second task on C, want once", n)
		}
	})

	t.Run("the spawn quota holds across hosts", func(t *testing.T) {
		const attempts = 9
		outs := make([]outcome, attempts)
		var wg sync.WaitGroup
		for i := range outs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body, _ := json.Marshal(map[string]any{"input": map[string]any{"family": "agentRuntime", "method": "spawn",
					"payload": agentruntime.SpawnRequest{ManifestID: "listener", IdempotencyKey: fmt.Sprintf("cluster-quota-%d", i)}}})
				r := <-requestAsync("POST", c.hosts[names[i%len(names)]].base+"/v1/nodes/shared.call:execute", string(body))
				if err := json.Unmarshal([]byte(r.body), &outs[i]); r.status != 200 || err != nil {
					outs[i].Status, outs[i].Error.Code = "failed", fmt.Sprintf("HTTP %d %s", r.status, r.body)
				}
			}()
		}
		wg.Wait()
		// The listener of the previous step holds one place of the quota.
		spawned, refused := 0, 0
		for i, o := range outs {
			switch {
			case o.Status != "failed" && o.Error.Code == "":
				spawned++
			case o.Error.Code == agentruntime.CodeAgentSpawnQuotaExhausted:
				refused++
			default:
				t.Errorf("spawn %d through %s: %+v", i, names[i%len(names)], o)
			}
		}
		if spawned != spawnQuota-1 || refused != attempts-spawnQuota+1 {
			t.Errorf("%d spawned and %d refused, want %d and %d (quota %d, one instance already)", spawned, refused,
				spawnQuota-1, attempts-spawnQuota+1, spawnQuota)
		}
	})

	t.Run("a run recorded on A replays on B", func(t *testing.T) {
		out := c.call(t, "a", "probe.call", "test.echo", "echo", map[string]string{"said": "recorded on A"})
		nodeSucceeded(t, "echo on A", out, nil)
		if !strings.HasPrefix(out.RunID, "run_") || !strings.Contains(string(out.Output), "recorded on A") {
			t.Fatalf("run on A: %+v", out)
		}
		res := runHost(t, "", "--config", c.cfgs["b"], "run", "--replay", out.RunID)
		if res.code != 0 || !strings.Contains(res.stdout, "recorded on A") {
			t.Fatalf("replay of %s through B's config: exit %d\n%s%s", out.RunID, res.code, res.stdout, res.stderr)
		}
		if got, want := compactJSON(t, res.stdout), compactJSON(t, string(out.Output)); got != want {
			t.Errorf("replay printed %s, the run on A answered %s", got, want)
		}
		// The echo, a call with effects, came from the invocation log A
		// kept in the database, not from the plugin.
		if want := "replay of " + out.RunID + ": 1 calls served from the log, 0 run live, 0 diverged"; !strings.Contains(res.stderr, want) {
			t.Errorf("the replay's summary lacks %q:\n%s", want, res.stderr)
		}
	})

	t.Run("a job accepted by A, killed before running it, is run once by another host and awaited through C", func(t *testing.T) {
		generate := func(name, key, provider, message string) aiResult {
			t.Helper()
			var res aiResult
			nodeSucceeded(t, "async generate on "+name, c.call(t, name, "shared.call", "aiEnvelope", "generate", map[string]any{
				"envelopeType": "bg", "provider": provider, "userMessage": message, "idempotencyKey": key, "async": true}), &res)
			if res.Status != "pending" || res.EnvelopeID == "" {
				t.Fatalf("async generate on %s: %+v", name, res)
			}
			return res
		}
		// The first job takes A's only worker and waits at the slow
		// provider; the second waits for the worker, leased to A, whose
		// lease keeps the other hosts' sweepers off it.
		generate("a", "cluster-job-blocker", "slow", "hold the worker")
		waitUntil(t, "the first job to reach the slow provider", func() bool { return c.slow.count() == 1 })
		const marker = "job-c41e: summarise the release"
		pending := generate("a", "cluster-job-1", "chat", marker)
		if n := c.provider.countContaining(marker); n != 0 {
			t.Fatalf("the provider saw the job %d times while A held it", n)
		}
		if code := c.hosts["a"].stop(t, syscall.SIGKILL); code != -1 {
			t.Logf("A exited with %d", code)
		}
		var done aiResult
		nodeSucceeded(t, "await on C", c.call(t, "c", "shared.call", "aiEnvelope", "await",
			map[string]any{"envelopeId": pending.EnvelopeID, "timeoutMs": 60000}), &done)
		if done.Status != "completed" || done.EnvelopeID != pending.EnvelopeID || done.Text != "ok" {
			t.Fatalf("await on C: %+v", done)
		}
		if n := c.provider.countContaining(marker); n != 1 {
			t.Errorf("the provider saw the job %d times, want once", n)
		}
		const tookOver = "taking over an async envelope whose host stopped"
		if !strings.Contains(c.hosts["b"].log(), tookOver) && !strings.Contains(c.hosts["c"].log(), tookOver) {
			t.Errorf("neither B nor C logged %q", tookOver)
		}
		c.openGate()
	})
}

// compactJSON is s without insignificant white space.
func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(strings.TrimSpace(s))); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return b.String()
}
