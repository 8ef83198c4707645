package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/test/testbin"
)

// startTestcap starts a host whose capabilities run the testcap plugin:
// "waits" with the config body given, "serves" plainly. Each backoff the
// host asks for is sent on entered and lasts until the test sends on
// release.
func startTestcap(t *testing.T, testcap, host, waitsBody string) (h *Host, rep *Report, entered chan time.Duration, release chan time.Time) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "host.hcl")
	text := `host {
  state_dir = "` + filepath.Join(dir, "state") + `"
` + host + `
}
capability "waits" {
  plugin   = "` + testcap + `"
  families = ["test.echo"]
` + waitsBody + `
}
capability "serves" {
  plugin   = "` + testcap + `"
  families = ["test.other"]
}
`
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, ldr, diags := config.Load(path)
	if diags.HasErrors() {
		t.Fatalf("config: %s", config.FormatDiagnostics(diags))
	}
	entered, release = make(chan time.Duration, 16), make(chan time.Time)
	policy := DefaultRestartPolicy()
	policy.After = func(d time.Duration) <-chan time.Time {
		entered <- d
		return release
	}
	h = NewWithOptions(cfg, ldr, hclog.NewNullLogger(), "test", Options{Restart: policy})
	rep = h.Start(context.Background())
	t.Cleanup(h.Close)
	return h, rep, entered, release
}

func record(t *testing.T, h *Host, name string) registry.Record {
	t.Helper()
	r, ok := h.reg.Record(name)
	if !ok {
		t.Fatalf("no record of %s", name)
	}
	return r
}

// nextWait returns the next backoff the host asks for.
func nextWait(t *testing.T, entered chan time.Duration) time.Duration {
	t.Helper()
	select {
	case d := <-entered:
		return d
	case <-time.After(15 * time.Second):
		t.Fatal("the host asked for no further backoff")
		return 0
	}
}

// TestConfigureStates runs the cases below against one build of testcap.
func TestConfigureStates(t *testing.T) {
	testcap, err := testbin.NewCache(t.TempDir()).Binary("./test/plugins/testcap")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("waiting", func(t *testing.T) { testWaitingIsConfiguredAgain(t, testcap) })
	t.Run("refused", func(t *testing.T) { testRefusedConfigureStillFails(t, testcap) })
	t.Run("required", func(t *testing.T) { testRequiredWaitingIsReportedApart(t, testcap) })
	t.Run("exits", func(t *testing.T) { testExitBeforeReadyIsReportedAtThePlugin(t, testcap) })
}

// A plugin that exits before its handshake, or during Configure, fails in
// its phase with its own last words, at its plugin attribute: in the
// diagnostic and in its record, which host plugins and GET /v1/plugins
// show without the diagnostic. An exit during Configure is no refusal of
// the config, and is not configured again.
func testExitBeforeReadyIsReportedAtThePlugin(t *testing.T, testcap string) {
	for _, tc := range []struct {
		body, summary string
		phase         registry.State
		reason        string
	}{
		{`env = { TESTCAP_START = "exit" }`, "Plugin failed to start", registry.StateStarted,
			"started: the process exited before completing its handshake (exit status 3); the last it wrote to stderr: testcap: cannot read /etc/testcap/model.bin: no such file or directory"},
		{"config { exit_configure = true }", "Plugin exited before it was ready", registry.StateConfigured,
			"configured: the process exited during Configure (exit status 4); the last it wrote to stderr: testcap: the licence server refused key TC-0000"},
	} {
		t.Run(string(tc.phase), func(t *testing.T) {
			h, rep, entered, _ := startTestcap(t, testcap, "", tc.body)
			// The plugin attribute of the block "waits" (startTestcap).
			at := filepath.Join(h.cfg.Dir, "host.hcl") + ":6:14"
			var diag *hcl.Diagnostic
			for _, d := range rep.Capabilities {
				if d.Subject != nil && d.Subject.Filename == filepath.Join(h.cfg.Dir, "host.hcl") && d.Subject.Start.Line == 6 {
					diag = d
				}
			}
			if diag == nil || diag.Summary != tc.summary || !strings.HasSuffix(diag.Detail, tc.reason) || config.FormatRange(*diag.Subject) != at {
				t.Errorf("diagnostics %s; want %q at %s ending %q", config.FormatDiagnostics(rep.Capabilities), tc.summary, at, tc.reason)
			}
			r := record(t, h, "waits")
			if want := at + ": " + tc.reason; r.State != registry.StateFailed || r.FailedPhase != tc.phase || r.LastError != want {
				t.Errorf("record %s (%s) with %q; want failed (%s) with %q", r.State, r.FailedPhase, r.LastError, tc.phase, want)
			}
			select {
			case d := <-entered:
				t.Errorf("a backoff (%s) for a plugin that exited", d)
			case <-time.After(300 * time.Millisecond):
			}
		})
	}
}

// A plugin that answers its Configure with the retryable unavailable is
// kept running but not ready, configured again with the restart policy's
// backoff however many times it takes (none of them a crash or a
// restart, so crash_limit = 1 does not give it up), and ready with its
// families advertised, in the same process, once it takes its config.
func testWaitingIsConfiguredAgain(t *testing.T, testcap string) {
	marker := filepath.Join(t.TempDir(), "database-up")
	h, rep, entered, release := startTestcap(t, testcap, "crash_limit = 1", "config { wait_for = \""+marker+"\" }")
	if rep.Fatal() || len(rep.Waiting) != 0 {
		t.Fatalf("start: fatal %v, waiting %v", rep.Fatal(), rep.Waiting)
	}
	if !strings.Contains(config.FormatDiagnostics(rep.Capabilities), "Plugin is waiting") {
		t.Errorf("capability diagnostics %q do not say the plugin is waiting", config.FormatDiagnostics(rep.Capabilities))
	}
	c := h.capabilityNamed("waits")
	proc := c.current()
	if proc == nil {
		t.Fatal("the waiting capability's process was stopped")
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}
	for i, w := range want {
		if got := nextWait(t, entered); got != w {
			t.Fatalf("wait %d = %s, want %s", i, got, w)
		}
		r := record(t, h, "waits")
		if r.State != registry.StateWaiting || r.FailedPhase != "" || !strings.Contains(r.LastError, "is not there yet") {
			t.Fatalf("record while waiting = %+v", r)
		}
		if h.reg.Has("test.echo", "") || !h.reg.Has("test.other", "") {
			t.Fatalf("advertised while waiting: %s", h.reg.Document())
		}
		if i < len(want)-1 {
			release <- time.Now()
		}
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	release <- time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for record(t, h, "waits").State != registry.StateReady {
		if time.Now().After(deadline) {
			t.Fatalf("not ready once the marker exists: %+v", record(t, h, "waits"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !h.reg.Has("test.echo", "") {
		t.Fatalf("test.echo not advertised once ready: %s", h.reg.Document())
	}
	if out, err := h.Call(context.Background(), "test.echo", "echo", []byte(`{"a":1}`), RunOptions{}); err != nil || string(out) != `{"a":1}` {
		t.Fatalf("call once ready: %s %v", out, err)
	}
	if c.current() != proc {
		t.Error("the capability was given a new process; the waiting one should have been configured again")
	}
	if r := record(t, h, "waits"); r.Restarts != 0 {
		t.Errorf("restarts = %d, want 0: waiting is no restart", r.Restarts)
	}
	select {
	case d := <-entered:
		t.Errorf("a further backoff (%s) after the capability became ready", d)
	case <-time.After(200 * time.Millisecond):
	}
}

// A Configure refused for good still fails the capability at once, its
// process stopped and nothing retried.
func testRefusedConfigureStillFails(t *testing.T, testcap string) {
	h, rep, entered, _ := startTestcap(t, testcap, "", "config { fail_configure = true }")
	if rep.Fatal() {
		t.Fatalf("start: %s", config.FormatDiagnostics(rep.Config))
	}
	r := record(t, h, "waits")
	if r.State != registry.StateFailed || r.FailedPhase != registry.StateConfigured {
		t.Fatalf("record = %+v, want failed in configured", r)
	}
	if h.capabilityNamed("waits").current() != nil {
		t.Error("the refused plugin's process is still held")
	}
	select {
	case d := <-entered:
		t.Errorf("a backoff (%s) for a configuration refused for good", d)
	case <-time.After(300 * time.Millisecond):
	}
}

// A required capability that is waiting does not make the start fatal:
// the report names it apart, the rest serves, and Ready says why the host
// is not ready.
func testRequiredWaitingIsReportedApart(t *testing.T, testcap string) {
	marker := filepath.Join(t.TempDir(), "database-up")
	h, rep, entered, _ := startTestcap(t, testcap, "", "required = true\n  config { wait_for = \""+marker+"\" }")
	if rep.Fatal() {
		t.Fatalf("start fatal: %s", config.FormatDiagnostics(rep.Config))
	}
	if len(rep.Waiting) != 1 || !strings.Contains(rep.Waiting[0].Detail, `"waits"`) {
		t.Fatalf("waiting = %v, want the required capability", rep.Waiting)
	}
	nextWait(t, entered)
	if !h.reg.Has("test.other", "") {
		t.Error("the other capability is not served")
	}
	err := h.Ready()
	nr, ok := err.(*NotReadyError)
	if !ok || nr.Capabilities["waits"] != registry.StateWaiting {
		t.Fatalf("Ready = %v, want waits waiting", err)
	}
}
