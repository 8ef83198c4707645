package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/hostwire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
	"github.com/wophost/wophost/test/testbin"
)

// nodeGreeterDir is the Node.js example plugin, which speaks the protocol
// of docs/protocol.md with no SDK.
const nodeGreeterDir = "examples/plugins/node-greeter"

// nodeGreeter returns the example's launcher. Without node or the
// example's packages (make node-plugin installs them) the test is skipped,
// or fails when WOPHOST_TEST_NODE is set, as in CI.
func nodeGreeter(t *testing.T) string {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("WOPHOST_TEST_NODE") != "" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("the Node.js example plugin needs node on PATH: %v", err)
	}
	dir := testbin.SourceDir(nodeGreeterDir)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@grpc", "grpc-js")); err != nil {
		missing("%s/node_modules is missing: run `make node-plugin` (npm ci) first", nodeGreeterDir)
	}
	return filepath.Join(dir, "wophost-node-greeter")
}

// nodeGreeterConfig declares the Node plugin next to the kv plugin it
// calls back; greeting is the HCL expression of its config attribute.
func nodeGreeterConfig(t *testing.T, greeting string) string {
	return writeConfig(t, `
host { plugin_dir = "BIN" }
`+nodeGreeterBlocks(t, greeting))
}

// nodeGreeterBlocks are the capability blocks of nodeGreeterConfig.
func nodeGreeterBlocks(t *testing.T, greeting string) string {
	return `
capability "kv" { plugin = "wophost-kv" }
capability "greet" {
  plugin = "` + nodeGreeter(t) + `"
  config {
    greeting = ` + greeting + `
  }
}
`
}

// lockedBuffer is a log sink read while the host may still write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startNodeGreeterHost starts a host of nodeGreeterBlocks at log level
// info, where the plugin's own info lines reach the host (which keeps a
// line's level only when the line is in hclog's JSON form), with its log
// in logs. closeHost stops it once, at the latest when t ends.
func startNodeGreeterHost(t *testing.T, greeting string) (h *host.Host, logs *lockedBuffer, closeHost func()) {
	t.Helper()
	cfgPath := writeConfig(t, `
host {
  plugin_dir = "BIN"
  log_level  = "info"
}
`+nodeGreeterBlocks(t, greeting))
	cfg, ldr, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		t.Fatalf("config: %s", config.FormatDiagnostics(diags))
	}
	logs = new(lockedBuffer)
	h = host.New(cfg, ldr, hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}), "test")
	closeHost = sync.OnceFunc(h.Close)
	t.Cleanup(closeHost)
	if d := h.Start(context.Background()).All(); d.HasErrors() {
		t.Fatalf("start: %s\n%s", config.FormatDiagnostics(d), logs.String())
	}
	return h, logs, closeHost
}

// The Node plugin becomes ready, advertises its family, answers through
// the host with a callback into acme.kv and with a family error in the
// envelope, and stops at the host's request, well before go-plugin's 2 s
// kill.
func TestNodePluginServesThroughTheHost(t *testing.T) {
	h, logs, closeHost := startNodeGreeterHost(t, `"Howdy"`)
	rec, _ := h.Registry().Record("greet")
	if rec.State != registry.StateReady || strings.Join(rec.Advertised, ",") != "acme.greet" {
		t.Fatalf("greet record = %+v, want ready advertising acme.greet", rec)
	}
	if _, ok := h.Registry().Advertised()["acme.greet"]; !ok {
		t.Fatalf("acme.greet is not advertised: %v", h.Registry().Advertised())
	}

	call := func(family, method, input string) (string, error) {
		out, err := h.Call(context.Background(), family, method, json.RawMessage(input), host.RunOptions{Timeout: 30 * time.Second})
		return string(out), err
	}
	if out, err := call("acme.greet", "greet", `{"name":"Ada"}`); err != nil || out != `{"greeting":"Howdy, Ada!","from":"input"}` {
		t.Errorf("greet before the nickname: %s, %v", out, err)
	}
	if _, err := call("acme.kv", "put", `{"key":"nickname/Ada","value":"Countess"}`); err != nil {
		t.Fatal(err)
	}
	if out, err := call("acme.greet", "greet", `{"name":"Ada"}`); err != nil || out != `{"greeting":"Howdy, Countess!","from":"acme.kv"}` {
		t.Errorf("greet through the callback: %s, %v", out, err)
	}
	_, err := call("acme.greet", "greet", `{"name":""}`)
	if e, ok := err.(*wop.Error); !ok || e.Code != wop.CodeValidation || e.Capability != "host.acme.greet.greet" || e.Message != `field "name": must be a non-empty string` {
		t.Errorf("empty name: %#v, want the plugin's validation_error envelope", err)
	}

	t0 := time.Now()
	closeHost()
	took := time.Since(t0)
	t.Logf("the host stopped in %s", took)
	if took > 1500*time.Millisecond {
		t.Errorf("stopping the host took %s; the plugin should exit at GRPCController.Shutdown, well under go-plugin's 2 s", took)
	}
	l := logs.String()
	if strings.Contains(l, "plugin failed to exit gracefully") || !regexp.MustCompile(`\[INFO\] +greet(\.\d+)?: stopping: the host asked the plugin to`).MatchString(l) {
		t.Errorf("the plugin did not stop at the host's request, or its log line lost its level:\n%s", l)
	}
	if m := regexp.MustCompile(`greet: plugin process exited:.*`).FindString(l); m == "" || strings.Contains(m, "error=") {
		t.Errorf("the plugin did not exit cleanly: %q\n%s", m, l)
	}
}

// A Node handler learns when nobody waits for its answer: greetLater's
// wait of a minute ends, through ctx.signal, when the call's deadline
// passes and when its caller cancels it, each with its own reason, and a
// wait that ends in time still greets.
func TestNodePluginHandlerStopsWithTheCall(t *testing.T) {
	h, logs, _ := startNodeGreeterHost(t, `"Hi"`)
	call := func(ctx context.Context, input string, timeout time.Duration) (string, error) {
		out, err := h.Call(ctx, "acme.greet", "greetLater", json.RawMessage(input), host.RunOptions{Timeout: timeout})
		return string(out), err
	}
	// stopped waits for the plugin's line saying greetLater stopped for
	// reason: a handler that ignored the call's end would wait a minute.
	stopped := func(reason string) {
		t.Helper()
		line := regexp.MustCompile(`greet(\.\d+)?: greetLater stopped waiting:.* reason=` + reason + `\b`)
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if line.MatchString(logs.String()) {
				return
			}
		}
		t.Errorf("the handler did not stop with reason %s:\n%s", reason, logs.String())
	}

	if out, err := call(context.Background(), `{"name":"Ada","afterMs":10}`, 30*time.Second); err != nil || out != `{"greeting":"Hi, Ada!","from":"input"}` {
		t.Errorf("greetLater in time: %s, %v", out, err)
	}

	_, err := call(context.Background(), `{"name":"Ada","afterMs":60000}`, 500*time.Millisecond)
	if wop.CodeOf(err) != wop.CodeDeadlineExceeded {
		t.Errorf("greetLater past its deadline: %v, want %s", err, wop.CodeDeadlineExceeded)
	}
	stopped("deadline_exceeded")

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	_, err = call(ctx, `{"name":"Ada","afterMs":60000}`, 30*time.Second)
	if wop.CodeOf(err) != wop.CodeCancelled {
		t.Errorf("greetLater cancelled: %v, want %s", err, wop.CodeCancelled)
	}
	stopped("cancelled")
}

// The CLI's `host call` reaches the Node plugin, and the plugin's call
// back into the host carries the run's token.
func TestNodePluginHostCall(t *testing.T) {
	cfg := nodeGreeterConfig(t, `"Hi"`)
	if res := runHost(t, `{"key":"nickname/Alan","value":"Prof"}`, "--config", cfg, "call", "acme.kv.put", "--input", "-"); res.code != 0 {
		t.Fatalf("put: exit %d %s", res.code, res.stderr)
	}
	res := runHost(t, `{"name":"Alan"}`, "--config", cfg, "--json", "call", "acme.greet.greet", "--input", "-")
	if res.code != 0 || strings.TrimSpace(res.stdout) != `{"greeting":"Hi, Prof!","from":"acme.kv"}` {
		t.Errorf("host call acme.greet.greet: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// A config the Node plugin refuses is reported where the operator wrote
// it, and a config the host refuses against the plugin's schema too.
func TestNodePluginConfigErrors(t *testing.T) {
	cfg := nodeGreeterConfig(t, `"  "`)
	res := runHost(t, "", "--config", cfg, "validate")
	if res.code != 1 || !strings.Contains(res.stdout+res.stderr, "host.hcl:8:16") || !strings.Contains(res.stdout+res.stderr, "greeting must not be empty or blank") {
		t.Errorf("plugin's diagnostic: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	cfg = nodeGreeterConfig(t, `["not", "a", "string"]`)
	res = runHost(t, "", "--config", cfg, "validate")
	if res.code != 1 || !strings.Contains(res.stdout+res.stderr, "host.hcl:8:16") {
		t.Errorf("schema type error: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// Below the host, on the wire: the health service answers for "plugin",
// Invoke is refused with unavailable until Configure, in the envelope;
// with the key pair the host hands over, and with go-plugin's AutoMTLS
// when the plugin finds none (the process cannot find the descriptor
// without its variable), where the plugin's own certificate in the
// handshake line is all the host trusts.
func TestNodePluginWire(t *testing.T) {
	exe := nodeGreeter(t)
	for _, autoMTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "LaunchKeyPair", true: "AutoMTLS"}[autoMTLS], func(t *testing.T) {
			nodePluginWire(t, exe, autoMTLS)
		})
	}
}

func nodePluginWire(t *testing.T, exe string, autoMTLS bool) {
	cmd := exec.Command(exe)
	cmd.Dir = filepath.Dir(exe)
	cmd.Env = hostwire.ProcessEnv("greet", hclog.Info, 1<<20)
	cfg, started, err := hostwire.ClientConfig(cmd, hclog.NewNullLogger(), 30*time.Second, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if autoMTLS {
		cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, hostwire.EnvTLSFD+"=") })
	}
	client := goplugin.NewClient(cfg)
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	started()
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if err := rpc.Ping(); err != nil {
		t.Errorf("health check of service \"plugin\": %v", err)
	}
	raw, err := rpc.Dispense(hostwire.KindCapability)
	if err != nil {
		t.Fatal(err)
	}
	conn := raw.(*hostwire.CapabilityConn)
	ctx := context.Background()
	desc, err := conn.Client.Describe(ctx, &wophostv1.DescribeRequest{})
	if err != nil || desc.GetName() != "wophost-node-greeter" || len(desc.GetFamilies()) != 1 || desc.GetFamilies()[0].GetUses()[0] != "acme.kv" {
		t.Fatalf("describe: %v, %v", desc, err)
	}
	_, err = conn.Client.Invoke(ctx, &wophostv1.InvokeRequest{Family: "acme.greet", Method: "greet", Payload: []byte(`{"name":"Ada"}`)})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("invoke before configure: gRPC code %v, want Unavailable", status.Code(err))
	}
	if e := hostwire.FromStatus(err); e.Code != wop.CodeUnavailable || !e.Retryable || e.Capability != "host.acme.greet.greet" {
		t.Errorf("invoke before configure: envelope %+v, want unavailable, retryable, its capability", e)
	}
	if _, err := conn.Client.Configure(ctx, &wophostv1.ConfigureRequest{Config: []byte(`{"greeting":"Yo"}`)}); err != nil {
		t.Fatal(err)
	}
	// No host services were offered: the plugin's callback fails
	// capability_not_provided, and greet, which uses acme.kv without
	// needing it, greets the name.
	resp, err := conn.Client.Invoke(ctx, &wophostv1.InvokeRequest{Family: "acme.greet", Method: "greet", Payload: []byte(`{"name":"Ada"}`)})
	if err != nil || string(resp.GetResult()) != `{"greeting":"Yo, Ada!","from":"input"}` {
		t.Errorf("invoke with no host services: %s, %v", resp.GetResult(), err)
	}
}

// The Node plugin exits on its own once the host is killed.
func TestNodePluginExitsWhenTheHostIsGone(t *testing.T) {
	d := startServe(t, writeConfig(t, `
host {
  plugin_dir = "BIN"
  http { listen = "127.0.0.1:0" }
}
capability "greet" { plugin = "`+nodeGreeter(t)+`" }
`))
	var node int
	for _, p := range testbin.Descendants(d.cmd.Process.Pid) {
		if strings.Contains(p.Command, "index.js") {
			node = p.PID
		}
	}
	if node == 0 {
		t.Fatalf("no node process under the host: %v", testbin.Descendants(d.cmd.Process.Pid))
	}
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = d.cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for alive(node) {
		if time.Now().After(deadline) {
			t.Fatalf("node process %d still runs 10 s after its host was killed", node)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
