package integration

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/sdk/wop"
)

// startHost starts the real host in this process over the real binaries.
func startHost(t *testing.T, cfgPath string) *host.Host {
	t.Helper()
	cfg, ldr, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		t.Fatalf("config: %s", config.FormatDiagnostics(diags))
	}
	h := host.New(cfg, ldr, hclog.NewNullLogger(), "test")
	rep := h.Start(context.Background())
	t.Cleanup(h.Close)
	if d := rep.All(); d.HasErrors() {
		t.Fatalf("start: %s", config.FormatDiagnostics(d))
	}
	return h
}

func TestCtxCallRoundTrip(t *testing.T) {
	cfg := probeConfig(t, "")
	input := `{"text":"héllo","n":12345678901234567890,"nested":{"list":[1,2.5,"x",null,true]}}`
	res := runHost(t, input, "--config", cfg, "--json", "run", "probe.echo", "--input", "-")
	if res.code != 0 {
		t.Fatalf("exit %d: %s%s", res.code, res.stdout, res.stderr)
	}
	if strings.TrimSpace(res.stdout) != input {
		t.Errorf("echo changed the payload:\n got %s\nwant %s", res.stdout, input)
	}
	// host call routes the same way for the operator.
	call := runHost(t, `{"x":[1,2]}`, "--config", cfg, "--json", "call", "test.echo.echo", "--input", "-")
	if call.code != 0 || strings.TrimSpace(call.stdout) != `{"x":[1,2]}` {
		t.Errorf("host call: exit %d %s %s", call.code, call.stdout, call.stderr)
	}
}

func TestErrorDetailArrivesIntact(t *testing.T) {
	cfg := probeConfig(t, "")
	res := runHost(t, `{"family":"test.echo","method":"fail"}`, "--config", cfg, "run", "probe.call", "--input", "-")
	e := decodeEnvelope(t, res)
	if e.Code != "test.boom" || e.Message != "the plugin failed on purpose" || !e.Retryable || e.Capability != "host.test.echo.fail" {
		t.Errorf("envelope changed on the way: %+v", e)
	}
	var details, want any
	_ = json.Unmarshal(e.Details, &details)
	_ = json.Unmarshal([]byte(`{"n":42,"nested":{"list":[1,2,3]},"text":"ünïcode"}`), &want)
	if !jsonEqual(details, want) {
		t.Errorf("details = %s", e.Details)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// The deadline of a run reaches the pack and the plugin as the same
// instant, and the plugin sees the run's identity.
func TestDeadlineCrossesBothHops(t *testing.T) {
	h := startHost(t, probeConfig(t, ""))
	res, err := h.Run(context.Background(), "probe.ctx", json.RawMessage(`{}`), host.RunOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Pack   string `json:"pack"`
		RunID  string `json:"runId"`
		Plugin struct {
			Context     string `json:"context"`
			CallContext string `json:"callContext"`
			Depth       int    `json:"depth"`
			RunID       string `json:"runId"`
			TypeID      string `json:"typeId"`
		} `json:"plugin"`
		AIEnvelopeNil    bool      `json:"aiEnvelopeNil"`
		NilGenerateError wop.Error `json:"nilGenerateError"`
	}
	if err := json.Unmarshal(res.Output, &out); err != nil {
		t.Fatal(err)
	}
	packDL, _ := time.Parse(time.RFC3339Nano, out.Pack)
	pluginDL, _ := time.Parse(time.RFC3339Nano, out.Plugin.Context)
	callDL, _ := time.Parse(time.RFC3339Nano, out.Plugin.CallContext)
	if packDL.IsZero() || !packDL.Equal(callDL) || pluginDL.After(packDL) || packDL.Sub(pluginDL) > time.Second {
		t.Errorf("deadlines differ: pack %s, plugin ctx %s, plugin call context %s", out.Pack, out.Plugin.Context, out.Plugin.CallContext)
	}
	if out.RunID != res.RunID || out.Plugin.RunID != res.RunID || out.Plugin.TypeID != "probe.ctx" || out.Plugin.Depth != 1 {
		t.Errorf("call context lost on the way: %+v (run %s)", out, res.RunID)
	}
	if !out.AIEnvelopeNil || out.NilGenerateError.Code != wop.CodeCapabilityNotProvided {
		t.Errorf("an unadvertised family must be nil and refuse cleanly: %+v", out)
	}
}

// waitForFile waits for path to hold something and returns it. The
// deadline is generous: the file stands for an event (a call reaching a
// process, a process starting) that a loaded machine may delay, and the
// wait ends as soon as it happens.
func waitForFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
	return ""
}

// Expiry and cancellation on the host end the plugin's work too, while
// the host and the plugin keep running.
func TestDeadlineExpiryAndCancellationReachThePlugin(t *testing.T) {
	h := startHost(t, probeConfig(t, ""))
	dir := t.TempDir()

	// The expiry: the run's deadline must pass while the call is in the
	// plugin, so it is long enough for the call to get there on a loaded
	// machine; the cancellation below runs meanwhile.
	expired := filepath.Join(dir, "expired")
	expiredStarted := filepath.Join(dir, "expired-started")
	expiry := make(chan error, 1)
	go func() {
		_, err := h.Run(context.Background(), "probe.sleep", json.RawMessage(`{"ms":60000,"marker":"`+expired+`","started":"`+expiredStarted+`"}`), host.RunOptions{Timeout: 20 * time.Second})
		expiry <- err
	}()

	// The cancellation, once the call has reached the plugin.
	cancelled := filepath.Join(dir, "cancelled")
	started := filepath.Join(dir, "cancelled-started")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancellation := make(chan error, 1)
	go func() {
		_, err := h.Run(ctx, "probe.sleep", json.RawMessage(`{"ms":60000,"marker":"`+cancelled+`","started":"`+started+`"}`), host.RunOptions{})
		cancellation <- err
	}()
	waitForFile(t, started)
	cancel()
	if err := <-cancellation; wop.CodeOf(err) != wop.CodeCancelled {
		t.Fatalf("got %v, want cancelled", err)
	}
	if got := waitForFile(t, cancelled); got != context.Canceled.Error() {
		t.Errorf("plugin saw %q, want %q", got, context.Canceled)
	}

	if err := <-expiry; wop.CodeOf(err) != wop.CodeDeadlineExceeded {
		t.Fatalf("got %v, want deadline_exceeded", err)
	}
	if _, err := os.Stat(expiredStarted); err != nil {
		t.Fatalf("the call never reached the plugin before its deadline: %v", err)
	}
	// Each hop runs its own timer for the same instant, so the plugin may
	// see the expiry itself or the cancellation of the hop before it.
	if got := waitForFile(t, expired); got != context.DeadlineExceeded.Error() && got != context.Canceled.Error() {
		t.Errorf("plugin saw %q, want its context ended", got)
	}

	// Both processes still serve.
	if _, err := h.Run(context.Background(), "probe.echo", json.RawMessage(`{}`), host.RunOptions{}); err != nil {
		t.Errorf("after cancellation: %v", err)
	}
}

func TestCallDepthIsLimited(t *testing.T) {
	cfg := probeConfig(t, "")
	cfg2 := strings.Replace(readFile(t, cfg), "host {\n", "host {\n  call_depth_limit = 3\n", 1)
	if err := os.WriteFile(cfg, []byte(cfg2), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHost(t, cfg)
	_, err := h.Run(context.Background(), "probe.call", json.RawMessage(`{"family":"test.echo","method":"callback"}`), host.RunOptions{Timeout: 30 * time.Second})
	var we *wop.Error
	if !errors.As(err, &we) || we.Code != wop.CodeCallDepthExceeded || !strings.Contains(we.Message, "call depth 4 is over the limit of 3") {
		t.Errorf("got %v, want call_depth_exceeded at depth 4", err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMessageSizeLimitOnBothEnds(t *testing.T) {
	cfg := probeConfig(t, "")
	if err := os.WriteFile(cfg, []byte(strings.Replace(readFile(t, cfg), "host {\n", "host {\n  max_message_bytes = 65536\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHost(t, cfg)
	big := `{"s":"` + strings.Repeat("x", 100_000) + `"}`
	// Request too large, sent by the operator.
	if _, err := h.Call(context.Background(), "test.echo", "echo", json.RawMessage(big), host.RunOptions{}); wop.CodeOf(err) != wop.CodeValidation {
		t.Errorf("oversized request: %v, want validation_error", err)
	}
	// Result too large, produced by the plugin: refused by the plugin's own
	// check on the way to the operator, and on the way to a pack.
	_, err := h.Call(context.Background(), "test.echo", "big", json.RawMessage(`{"bytes":100000}`), host.RunOptions{})
	if c := wop.CodeOf(err); c != wop.CodeUpstreamUnavailable {
		t.Errorf("oversized result: %v, want upstream_unavailable", err)
	}
	_, err = h.Run(context.Background(), "probe.call", json.RawMessage(`{"family":"test.echo","method":"big","payload":{"bytes":100000}}`), host.RunOptions{Timeout: time.Minute})
	if c := wop.CodeOf(err); c != wop.CodeUpstreamUnavailable {
		t.Errorf("oversized result of a ctx call: %v, want upstream_unavailable", err)
	}
	// A result of exactly 65536 bytes ({"data":"x..."} with 65525 x) passes
	// the plugin's check, but its gRPC message, with the field's framing,
	// does not fit: the transport refuses it, and it is still a result.
	_, err = h.Call(context.Background(), "test.echo", "big", json.RawMessage(`{"bytes":65525}`), host.RunOptions{})
	if c := wop.CodeOf(err); c != wop.CodeUpstreamUnavailable {
		t.Errorf("result refused by the transport: %v, want upstream_unavailable", err)
	}
	// Under the limit everything flows.
	if _, err := h.Call(context.Background(), "test.echo", "big", json.RawMessage(`{"bytes":1000}`), host.RunOptions{}); err != nil {
		t.Errorf("small result: %v", err)
	}
}

// A plugin that crashes has its family withdrawn and is restarted;
// in-flight calls fail unavailable and other families keep serving.
func TestCrashedPluginIsRestarted(t *testing.T) {
	h := startHost(t, probeConfig(t, ""))
	_, err := h.Call(context.Background(), "test.other", "exit", json.RawMessage(`{}`), host.RunOptions{})
	if c := wop.CodeOf(err); c != wop.CodeUnavailable {
		t.Errorf("call that crashed the plugin: %v, want unavailable", err)
	}
	if _, err := h.Call(context.Background(), "test.echo", "echo", json.RawMessage(`{}`), host.RunOptions{}); err != nil {
		t.Errorf("other family stopped serving: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range h.Registry().Records() {
			if r.Name == "other" && r.State == "ready" && r.Restarts >= 1 {
				if _, err := h.Call(context.Background(), "test.other", "echo", json.RawMessage(`{}`), host.RunOptions{}); err != nil {
					t.Fatalf("after restart: %v", err)
				}
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("plugin was not restarted: %+v", h.Registry().Records())
}

// host call and host run print '<', '>' and '&' as themselves, not as
// the \u003c escapes of encoding/json (which the plugin's answer carries
// on the wire), in an answer and in a failure's envelope, indented or
// with --json.
func TestCLIPrintsHTMLCharactersAsThemselves(t *testing.T) {
	cfg := probeConfig(t, "")
	const value = `<b>&`
	check := func(what string, res result, wantCode int, want string) {
		t.Helper()
		if res.code != wantCode {
			t.Fatalf("%s: exit %d, want %d: %s%s", what, res.code, wantCode, res.stdout, res.stderr)
		}
		for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
			if strings.Contains(res.stdout, esc) {
				t.Errorf("%s prints %s:\n%s", what, esc, res.stdout)
			}
		}
		if !strings.Contains(res.stdout, want) {
			t.Errorf("%s lacks %s:\n%s", what, want, res.stdout)
		}
	}
	input := `{"text":"` + value + `"}`
	check("host call", runHost(t, input, "--config", cfg, "call", "test.echo.echo", "--input", "-"), 0, `"text": "`+value+`"`)
	check("host call --json", runHost(t, input, "--config", cfg, "--json", "call", "test.echo.echo", "--input", "-"), 0, input)
	check("host run --json", runHost(t, input, "--config", cfg, "--json", "run", "probe.echo", "--input", "-"), 0, input)
	check("a refused host call", runHost(t, "{}", "--config", cfg, "call", "test."+value+".get", "--input", "-"), 1, `host.test.`+value)
}
