package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/wop"
)

// startHostLogged is startHost with the host's log (and so the lines it
// re-emits from plugins) written to logs at warn level and above.
func startHostLogged(t *testing.T, cfgPath string, logs *lockedLog) *host.Host {
	t.Helper()
	cfg, ldr, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		t.Fatalf("config: %s", config.FormatDiagnostics(diags))
	}
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: logs})
	h := host.New(cfg, ldr, logger, "test")
	rep := h.Start(context.Background())
	t.Cleanup(h.Close)
	if d := rep.All(); d.HasErrors() {
		t.Fatalf("start: %s", config.FormatDiagnostics(d))
	}
	return h
}

// lockedLog collects log output written from several goroutines.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// health runs serverHealth for id and returns status and protocolVersion.
func health(t *testing.T, h *host.Host, id string) (status, version string) {
	t.Helper()
	out, err := mcpCall(t, h, "serverHealth", `{"serverId":"`+id+`"}`)
	if err != nil {
		t.Fatalf("serverHealth %s: %v", id, err)
	}
	var r struct {
		Status          string `json:"status"`
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	return r.Status, r.ProtocolVersion
}

// A server whose executable is missing fails alone: the capability is
// ready, the other server serves, the broken one's calls are
// upstream_unavailable naming it and the reason, serverHealth tells the
// two apart, and the reason is in the host's log.
func TestMCPServersFailOneAtATime(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-mcp-server")
	logs := &lockedLog{}
	h := startHostLogged(t, writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
}
capability "mcp" {
  plugin = %q
  config {
    server "good" {
      command = [%q]
    }
    server "gone" {
      command = [%q, "--stdio"]
    }
  }
}
pack "private.wophost.mcppack" { path = %q }
`, binary(t, "./plugins/mcp"), binary(t, "./test/mcpservers/scripted"), missing, mcpPack(t))), logs)

	if r := capRecord(h, "mcp"); r.State != registry.StateReady {
		t.Fatalf("mcp capability = %+v, want ready", r)
	}
	out, err := mcpCall(t, h, "callTool", `{"serverId":"good","name":"passthrough"}`)
	if err != nil {
		t.Fatalf("good server: %v", err)
	}
	sameJSON(t, out, passthrough)

	for method, payload := range map[string]string{
		"callTool":     `{"serverId":"gone","name":"x"}`,
		"listTools":    `{"serverId":"gone"}`,
		"readResource": `{"serverId":"gone","uri":"file:///x"}`,
	} {
		_, err := mcpCall(t, h, method, payload)
		we := wop.AsError(err)
		if we == nil || we.Code != wop.CodeUpstreamUnavailable || !we.Retryable ||
			!strings.Contains(we.Message, `"gone"`) || !strings.Contains(we.Message, missing) || !strings.Contains(we.Message, "no such file") {
			t.Errorf("%s on the broken server: %v, want a retryable upstream_unavailable naming the server, its executable and why", method, err)
		}
	}
	// The broken one takes nothing down with it.
	if _, err := mcpCall(t, h, "callTool", `{"serverId":"good","name":"passthrough"}`); err != nil {
		t.Errorf("good server after the broken one's calls: %v", err)
	}
	if s, v := health(t, h, "good"); s != "reachable" || v != "2026-07-28" {
		t.Errorf("good health = %s %s", s, v)
	}
	if s, _ := health(t, h, "gone"); s != "unreachable" {
		t.Errorf("gone health = %s, want unreachable", s)
	}
	log := logs.String()
	var warned bool
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "[WARN]") && strings.Contains(line, "server=gone") && strings.Contains(line, missing) {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning naming the broken server and its executable in the host's log:\n%s", log)
	}
	// The capability lists the broken server with the reason and where it
	// is configured, for `host plugins` and GET /v1/plugins.
	if w := capRecord(h, "mcp").Warnings; len(w) != 1 || !strings.Contains(w[0], `MCP server "gone" cannot be started`) ||
		!strings.Contains(w[0], missing) || !strings.Contains(w[0], "host.hcl:12:17") {
		t.Errorf("mcp capability warnings = %q, want the broken server, why, and its place in host.hcl", w)
	}
}

// A legacy server's requests to the client count against max_rounds: a
// server that asks for an elicitation again and again is cut after
// max_rounds answers, and the call ends upstream_unavailable.
func TestMCPLegacyServerRequestsCountAgainstMaxRounds(t *testing.T) {
	h := startHost(t, writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
}
capability "mcp" {
  plugin = %q
  config {
    max_rounds = 3
    server "legacy" {
      command          = [%q, "-legacy"]
      discover_timeout = "2s"
    }
  }
}
pack "private.wophost.mcppack" { path = %q }
`, binary(t, "./plugins/mcp"), binary(t, "./test/mcpservers/gosdk"), mcpPack(t))))

	start := time.Now()
	_, err := mcpCall(t, h, "callTool", `{"serverId":"legacy","name":"elicit_loop","arguments":{}}`)
	we := wop.AsError(err)
	if we == nil || we.Code != wop.CodeUpstreamUnavailable || !strings.Contains(we.Message, "max_rounds") {
		t.Fatalf("looping legacy server: %v, want upstream_unavailable naming max_rounds", err)
	}
	var count struct {
		StructuredContent struct {
			Answered int    `json:"answered"`
			Ended    bool   `json:"ended"`
			Why      string `json:"why"`
		} `json:"structuredContent"`
	}
	waitUntil(t, "the server's loop to end", func() bool {
		out, err := mcpCall(t, h, "callTool", `{"serverId":"legacy","name":"loop_count","arguments":{}}`)
		if err != nil {
			t.Fatalf("loop_count: %v", err)
		}
		if err := json.Unmarshal(out, &count); err != nil {
			t.Fatal(err)
		}
		return count.StructuredContent.Ended
	})
	if c := count.StructuredContent; c.Answered != 3 {
		t.Errorf("the server had %d elicitations answered (it stopped because: %s), want max_rounds = 3", c.Answered, c.Why)
	}
	t.Logf("looping legacy server cut after %v", time.Since(start).Round(time.Millisecond))
}

// A stdio server whose probe failed is probed again: one that exits on
// its first start is used at 2026-07-28 from the first call on, and one
// that ignored its first probe (taken for a 2025-11-25 server) is probed
// again when its process is restarted.
func TestMCPFailedProbeIsRepeated(t *testing.T) {
	marks := t.TempDir()
	scripted := binary(t, "./test/mcpservers/scripted")
	h := startHost(t, writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
}
capability "mcp" {
  plugin = %q
  config {
    server "flaky" {
      command          = [%q, "-first-start-exit", %q]
      discover_timeout = "1s"
    }
    server "slow" {
      command          = [%q, "-era", "dual", "-first-start-silent", %q]
      discover_timeout = "1s"
    }
  }
}
pack "private.wophost.mcppack" { path = %q }
`, binary(t, "./plugins/mcp"), scripted, filepath.Join(marks, "flaky"), scripted, filepath.Join(marks, "slow"), mcpPack(t))))

	revision := func(id string) string {
		t.Helper()
		out, err := mcpCall(t, h, "callTool", `{"serverId":"`+id+`","name":"echo_params","arguments":{}}`)
		if err != nil {
			t.Fatalf("%s echo_params: %v", id, err)
		}
		var r struct {
			StructuredContent struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"structuredContent"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		raw, ok := r.StructuredContent.Meta["io.modelcontextprotocol/protocolVersion"]
		if !ok {
			return "2025-11-25" // a legacy request carries no _meta
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	if v := revision("flaky"); v != "2026-07-28" {
		t.Errorf("flaky server used at %s, want 2026-07-28", v)
	}
	if s, v := health(t, h, "flaky"); s != "reachable" || v != "2026-07-28" {
		t.Errorf("flaky health = %s %s", s, v)
	}

	// The silent first probe makes the dual-era server a legacy one for
	// the life of that process only.
	if v := revision("slow"); v != "2025-11-25" {
		t.Errorf("slow server after a silent probe used at %s, want 2025-11-25", v)
	}
	if _, err := mcpCall(t, h, "callTool", `{"serverId":"slow","name":"exit","arguments":{}}`); wop.CodeOf(err) != wop.CodeUpstreamUnavailable {
		t.Fatalf("exit: %v", err)
	}
	if v := revision("slow"); v != "2026-07-28" {
		t.Errorf("slow server after its restart used at %s, want 2026-07-28", v)
	}
}

// clientCapabilities returns what the client declared to the scripted
// servers: in the _meta of a 2026-07-28 request and in a 2025-11-25
// initialize.
func clientCapabilities(t *testing.T, h *host.Host) (modern, legacy map[string]json.RawMessage) {
	t.Helper()
	out, err := mcpCall(t, h, "callTool", `{"serverId":"modern","name":"echo_params","arguments":{}}`)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		StructuredContent struct {
			Meta struct {
				Caps map[string]json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
			} `json:"_meta"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(out, &m); err != nil || m.StructuredContent.Meta.Caps == nil {
		t.Fatalf("echo_params = %s %v", out, err)
	}
	out, err = mcpCall(t, h, "callTool", `{"serverId":"legacy","name":"echo_init","arguments":{}}`)
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		StructuredContent struct {
			Caps map[string]json.RawMessage `json:"capabilities"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(out, &l); err != nil || l.StructuredContent.Caps == nil {
		t.Fatalf("echo_init = %s %v", out, err)
	}
	return m.StructuredContent.Meta.Caps, l.StructuredContent.Caps
}

// askSampling runs the legacy Go SDK server's ask tool and returns what
// it reports of its sampling request.
func askSampling(t *testing.T, h *host.Host) string {
	t.Helper()
	out, err := mcpCall(t, h, "callTool", `{"serverId":"gosdk","name":"ask","arguments":{}}`)
	if err != nil {
		t.Fatal(err)
	}
	_, sampling, _ := strings.Cut(string(out), "sampling")
	return "sampling" + strings.SplitN(sampling, `"`, 2)[0]
}

// Sampling is declared to servers, modern and legacy, only when the host
// advertises aiEnvelope to answer it; a legacy server's sampling request
// is then answered through aiEnvelope as part of the call it came in.
func TestMCPSamplingDeclaredOnlyWithAIEnvelope(t *testing.T) {
	scripted := binary(t, "./test/mcpservers/scripted")
	servers := fmt.Sprintf(`
    server "modern" {
      command = [%q]
    }
    server "legacy" {
      command = [%q, "-era", "legacy-error"]
    }
    server "gosdk" {
      command          = [%q, "-legacy"]
      discover_timeout = "2s"
    }`, scripted, scripted, binary(t, "./test/mcpservers/gosdk"))

	without := startHost(t, writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
}
capability "mcp" {
  plugin = %q
  config {%s
  }
}
pack "private.wophost.mcppack" { path = %q }
`, binary(t, "./plugins/mcp"), servers, mcpPack(t))))
	modern, legacy := clientCapabilities(t, without)
	if modern["sampling"] != nil || legacy["sampling"] != nil || modern["elicitation"] == nil || legacy["elicitation"] == nil {
		t.Errorf("without aiEnvelope: declared %v (2026-07-28) and %v (2025-11-25), want elicitation without sampling", keys(modern), keys(legacy))
	}
	if got := askSampling(t, without); got != "sampling declined" {
		t.Errorf("legacy sampling without aiEnvelope: %q", got)
	}
	without.Close()

	with := startHost(t, writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
}
capability "ai" {
  plugin = %q
  config {
    default_provider = "local"
    provider "local" {
      type  = "local"
      rules = "{\"rules\":[{\"match\":\"(?i)say hi\",\"text\":\"hi from aiEnvelope\"}]}"
    }
  }
}
capability "mcp" {
  plugin = %q
  config {%s
  }
}
pack "private.wophost.mcppack" { path = %q }
`, binary(t, "./plugins/aienvelope"), binary(t, "./plugins/mcp"), servers, mcpPack(t))))
	modern, legacy = clientCapabilities(t, with)
	if modern["sampling"] == nil || legacy["sampling"] == nil {
		t.Errorf("with aiEnvelope: declared %v (2026-07-28) and %v (2025-11-25), want sampling in both", keys(modern), keys(legacy))
	}
	if got := askSampling(t, with); got != "sampling hi from aiEnvelope" {
		t.Errorf("legacy sampling through aiEnvelope: %q", got)
	}
}

func keys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The codes besides not_found, mcp_error and upstream_unavailable that an
// MCP call can end with, each from the host's side of the call.
func TestMCPCallHostCodes(t *testing.T) {
	// The scripted server adds a line to silentMark for each call to its
	// silent tool: the proof that a call is waiting on the server.
	silentMark := filepath.Join(t.TempDir(), "silent")
	h := startHost(t, writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir        = "BIN"
  max_message_bytes = 65536
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "mcp" {
  plugin = %q
  config {
    server "scripted" {
      command = [%q, "-silent-mark", %q]
      timeout = "60s"
    }
  }
}
pack "private.wophost.mcppack" { path = %q }
pack "private.wophost.probe" { path = %q }
`, binary(t, "./plugins/mcp"), binary(t, "./test/mcpservers/scripted"), silentMark, mcpPack(t), probePack(t))))
	const silent = `{"method":"callTool","request":{"serverId":"scripted","name":"silent"}}`
	run := func(ctx context.Context, in string, timeout time.Duration) error {
		_, err := h.Run(ctx, "mcppack.call", json.RawMessage(in), host.RunOptions{Timeout: timeout})
		return err
	}
	silentCalls := func() int {
		b, _ := os.ReadFile(silentMark) // absent before the first call
		return strings.Count(string(b), "\n")
	}
	// startSilent starts a call to the silent tool and returns once the
	// server holds it.
	startSilent := func(t *testing.T, ctx context.Context) <-chan error {
		before := silentCalls()
		done := make(chan error, 1)
		go func() { done <- run(ctx, silent, time.Minute) }()
		waitUntil(t, "the call to reach the silent server", func() bool { return silentCalls() > before })
		return done
	}

	t.Run("deadline_exceeded", func(t *testing.T) {
		err := run(context.Background(), silent, time.Second)
		if we := wop.AsError(err); we == nil || we.Code != wop.CodeDeadlineExceeded {
			t.Errorf("a call past the run's deadline: %v, want deadline_exceeded", err)
		}
	})

	t.Run("deadline_exceeded of the node's own budget", func(t *testing.T) {
		// The node gives the call a second; the run has a minute, so the
		// node returns what the call ended with.
		start := time.Now()
		err := run(context.Background(), `{"method":"callTool","budgetMs":1000,"request":{"serverId":"scripted","name":"silent"}}`, time.Minute)
		if we := wop.AsError(err); we == nil || we.Code != wop.CodeDeadlineExceeded || time.Since(start) > 30*time.Second {
			t.Errorf("a call past the node's own deadline: %v after %v, want deadline_exceeded", err, time.Since(start))
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		inFlight := startSilent(t, ctx)
		cancel()
		var err error
		select {
		case err = <-inFlight:
		case <-time.After(30 * time.Second):
			t.Fatal("the cancelled call did not end")
		}
		if wop.CodeOf(err) != wop.CodeCancelled {
			t.Errorf("a cancelled call: %v, want cancelled", err)
		}
	})

	t.Run("validation_error", func(t *testing.T) {
		for _, req := range []string{
			`{"serverId":"scripted","name":"passthrough","bogus":true}`,
			`{"serverId":7,"name":"passthrough"}`,
		} {
			err := run(context.Background(), `{"method":"callTool","raw":true,"request":`+req+`}`, time.Minute)
			if wop.CodeOf(err) != wop.CodeValidation {
				t.Errorf("malformed request %s: %v, want validation_error", req, err)
			}
		}
	})

	t.Run("validation_error over max_message_bytes", func(t *testing.T) {
		err := run(context.Background(), `{"method":"callTool","padBytes":100000,"request":{"serverId":"scripted","name":"echo_params"}}`, time.Minute)
		if wop.CodeOf(err) != wop.CodeValidation {
			t.Errorf("a request over max_message_bytes: %v, want validation_error", err)
		}
		// Under it the same request goes through.
		if err := run(context.Background(), `{"method":"callTool","padBytes":1000,"request":{"serverId":"scripted","name":"passthrough"}}`, time.Minute); err != nil {
			t.Errorf("a request under max_message_bytes: %v", err)
		}
	})

	t.Run("not_found for an unknown method", func(t *testing.T) {
		err := run(context.Background(), `{"method":"callTools","raw":true,"request":{"serverId":"scripted"}}`, time.Minute)
		if wop.CodeOf(err) != wop.CodeNotFound {
			t.Errorf("unknown method: %v, want not_found", err)
		}
	})

	t.Run("capability_not_declared", func(t *testing.T) {
		// The probe pack lists mcp as an optional peer without the client
		// facet.
		_, err := h.Run(context.Background(), "probe.call",
			json.RawMessage(`{"family":"mcp","method":"callTool","payload":{"serverId":"scripted","name":"passthrough"}}`), host.RunOptions{Timeout: time.Minute})
		if wop.CodeOf(err) != wop.CodeCapabilityNotDeclared {
			t.Errorf("an undeclared call: %v, want capability_not_declared", err)
		}
	})

	t.Run("unavailable, retryable, across a restart", func(t *testing.T) {
		inFlight := startSilent(t, context.Background())
		if err := syscall.Kill(pluginPID(t, binary(t, "./plugins/mcp")), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var err error
		select {
		case err = <-inFlight:
		case <-time.After(10 * time.Second):
			t.Fatal("the call in flight did not end when the plugin died")
		}
		if we := wop.AsError(err); we == nil || we.Code != wop.CodeUnavailable || !wop.IsRetryable(err) {
			t.Errorf("the call in flight: %v, want a retryable unavailable", err)
		}
		waitUntil(t, "the family to be withdrawn", func() bool { return capRecord(h, "mcp").State != registry.StateReady })
		err = run(context.Background(), `{"method":"callTool","request":{"serverId":"scripted","name":"passthrough"}}`, time.Minute)
		if wop.CodeOf(err) != wop.CodeUnavailable || !wop.IsRetryable(err) {
			t.Errorf("a call while the plugin restarts: %v, want unavailable, retryable", err)
		}
		waitForState(t, h, "mcp", registry.StateReady, 1)
		if _, err := mcpCall(t, h, "callTool", `{"serverId":"scripted","name":"passthrough"}`); err != nil {
			t.Errorf("after the restart: %v", err)
		}
	})
}

// The operator's `host call` makes a run of its own, through which the
// mcp plugin reaches aiEnvelope: sampling is declared to servers there,
// as in a node's run, and a server's sampling request is answered. The
// official Go SDK's server reports what the client declared in its
// initialize, the scripted one what a 2026-07-28 request carried.
func TestMCPSamplingDeclaredForHostCall(t *testing.T) {
	cfg := writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
}
capability "ai" {
  plugin = %q
  config {
    default_provider = "local"
    provider "local" {
      type  = "local"
      rules = "{\"rules\":[{\"match\":\"(?i)say hi\",\"text\":\"hi from aiEnvelope\"}]}"
    }
  }
}
capability "mcp" {
  plugin = %q
  config {
    server "modern" {
      command = [%q]
    }
    server "gosdk" {
      command          = [%q, "-legacy"]
      discover_timeout = "2s"
    }
  }
}
`, binary(t, "./plugins/aienvelope"), binary(t, "./plugins/mcp"), binary(t, "./test/mcpservers/scripted"), binary(t, "./test/mcpservers/gosdk")))
	call := func(server, tool string) string {
		t.Helper()
		res := runHost(t, `{"serverId":"`+server+`","name":"`+tool+`","arguments":{}}`, "--config", cfg, "--json", "call", "mcp.callTool", "--input", "-")
		if res.code != 0 {
			t.Fatalf("host call %s %s: exit %d\n%s%s", server, tool, res.code, res.stdout, res.stderr)
		}
		return res.stdout
	}
	var legacy struct {
		StructuredContent struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		} `json:"structuredContent"`
	}
	if out := call("gosdk", "client_caps"); json.Unmarshal([]byte(out), &legacy) != nil || legacy.StructuredContent.Capabilities["sampling"] == nil {
		t.Errorf("2025-11-25 initialize under host call declared %s, want sampling", out)
	}
	var modern struct {
		StructuredContent struct {
			Meta struct {
				Caps map[string]json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
			} `json:"_meta"`
		} `json:"structuredContent"`
	}
	if out := call("modern", "echo_params"); json.Unmarshal([]byte(out), &modern) != nil || modern.StructuredContent.Meta.Caps["sampling"] == nil {
		t.Errorf("2026-07-28 request under host call declared %s, want sampling", out)
	}
	if out := call("gosdk", "ask"); !strings.Contains(out, "sampling hi from aiEnvelope") {
		t.Errorf("legacy sampling under host call: %s, want it answered through aiEnvelope", out)
	}
}

// A stdio server that answers under an id the plugin never sent gets the
// call refused at once as upstream_unavailable naming that id, long
// before the server's 60 s timeout, and the server serves the next call.
func TestMCPWrongIDRefusedAtOnce(t *testing.T) {
	h := startHost(t, writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
}
capability "mcp" {
  plugin = %q
  config {
    server "scripted" {
      command = [%q]
      timeout = "60s"
    }
  }
}
pack "private.wophost.mcppack" { path = %q }
`, binary(t, "./plugins/mcp"), binary(t, "./test/mcpservers/scripted"), mcpPack(t))))
	start := time.Now()
	_, err := mcpCall(t, h, "callTool", `{"serverId":"scripted","name":"wrong_id"}`)
	took := time.Since(start)
	we := wop.AsError(err)
	if we == nil || we.Code != wop.CodeUpstreamUnavailable || !we.Retryable || !strings.Contains(we.Message, "wrong id") || !strings.Contains(we.Message, "987654321") {
		t.Fatalf("wrong_id: %v, want upstream_unavailable, retryable, naming the wrong id 987654321", err)
	}
	if strings.Contains(we.Message, "no answer") || took >= 30*time.Second {
		t.Errorf("wrong_id answered after %v with %q: the timeout's answer", took, we.Message)
	}
	out, err := mcpCall(t, h, "callTool", `{"serverId":"scripted","name":"passthrough"}`)
	if err != nil || !strings.Contains(string(out), `"vendor.example/trace":"t-1"`) {
		t.Errorf("after the wrong id: %s %v", out, err)
	}
}
