package integration

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// startHostWith is startHost with options that do not come from host.hcl.
func startHostWith(t *testing.T, cfgPath string, opts host.Options) *host.Host {
	t.Helper()
	cfg, ldr, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		t.Fatalf("config: %s", config.FormatDiagnostics(diags))
	}
	h := host.NewWithOptions(cfg, ldr, hclog.NewNullLogger(), "test", opts)
	rep := h.Start(context.Background())
	t.Cleanup(h.Close)
	if d := rep.All(); d.HasErrors() {
		t.Fatalf("start: %s", config.FormatDiagnostics(d))
	}
	return h
}

// waits records every backoff a restart policy asks for, and when each
// was asked for.
type waits struct {
	mu    sync.Mutex
	delay []time.Duration
	at    []time.Time
}

func (w *waits) record(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.delay = append(w.delay, d)
	w.at = append(w.at, time.Now())
}

// skipping is the default restart policy with each wait recorded in w
// and skipped.
func (w *waits) skipping() host.RestartPolicy {
	policy := host.DefaultRestartPolicy()
	policy.After = func(d time.Duration) <-chan time.Time {
		w.record(d)
		return time.After(0)
	}
	return policy
}

// heldRestarts is the default restart policy with each wait reported on
// entered and lasting until the test sends on release.
func heldRestarts() (policy host.RestartPolicy, entered chan time.Duration, release chan time.Time) {
	entered, release = make(chan time.Duration, 8), make(chan time.Time)
	policy = host.DefaultRestartPolicy()
	policy.After = func(d time.Duration) <-chan time.Time {
		entered <- d
		return release
	}
	return policy, entered, release
}

func (w *waits) snapshot() ([]time.Duration, []time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.delay), slices.Clone(w.at)
}

// ownTestcap copies the testcap plugin into a directory of the test's own,
// so that the test can replace it, and returns a config whose capability
// "other" runs that copy and whose capability "echo" runs the shared one.
func ownTestcap(t *testing.T) (cfg, pluginPath string) {
	t.Helper()
	dir := t.TempDir()
	pluginPath = filepath.Join(dir, "testcap")
	copyExecutable(t, bin.testcap, pluginPath, 0o755)
	return writeConfig(t, `
host { plugin_dir = "BIN" }
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "other" {
  plugin   = "`+pluginPath+`"
  families = ["test.other"]
}
`), pluginPath
}

// replaceWithFailing puts, at path, a binary that exits at once with
// status 1. A process already started from the old file keeps running:
// the loader starts each process from the file it opened.
func replaceWithFailing(t *testing.T, path string) {
	t.Helper()
	falseBin := "/bin/false"
	if _, err := os.Stat(falseBin); err != nil {
		falseBin = "/usr/bin/false"
	}
	tmp := path + ".new"
	copyExecutable(t, falseBin, tmp, 0o755)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// crashOther makes the "other" capability's plugin exit during a call.
func crashOther(t *testing.T, h *host.Host) {
	t.Helper()
	_, err := h.Call(context.Background(), "test.other", "exit", json.RawMessage(`{}`), host.RunOptions{})
	if c := wop.CodeOf(err); c != wop.CodeUnavailable {
		t.Fatalf("the crashing call: %v, want unavailable", err)
	}
}

// The restart policy of docs/operations.md (Lifecycle): backoff from 0.5 s doubling to a 30 s cap,
// five attempts, then failed. The waits are observed, not timed: the
// policy's After reports each one and returns at once.
func TestRestartPolicyGivesUpAfterFiveAttempts(t *testing.T) {
	cfg, plugin := ownTestcap(t)
	w := &waits{}
	h := startHostWith(t, cfg, host.Options{Restart: w.skipping()})

	// Every later start of "other" exits at once.
	replaceWithFailing(t, plugin)
	crashOther(t, h)
	r := waitForState(t, h, "other", registry.StateFailed, 5)

	delays, _ := w.snapshot()
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	if !slices.Equal(delays, want) {
		t.Errorf("backoffs %v, want %v", delays, want)
	}
	if r.Restarts != 5 {
		t.Errorf("restarts = %d, want 5 attempts counted", r.Restarts)
	}
	if !strings.Contains(r.LastError, "gave up after 5 restart attempts") {
		t.Errorf("failed record %+v does not say it gave up after five attempts", r)
	}
	if _, err := h.Call(context.Background(), "test.other", "echo", json.RawMessage(`{}`), host.RunOptions{}); wop.CodeOf(err) != wop.CodeCapabilityNotProvided {
		t.Errorf("call to the given-up family: %v, want capability_not_provided", err)
	}
	if _, err := h.Call(context.Background(), "test.echo", "echo", json.RawMessage(`{}`), host.RunOptions{}); err != nil {
		t.Errorf("the other family stopped serving: %v", err)
	}
}

// The backoff doubles up to its cap, and each attempt really waits its
// backoff: measured with real timers, the gap between two attempts is at
// least the earlier one's wait.
func TestRestartBackoffDoublesToItsCap(t *testing.T) {
	cfg, plugin := ownTestcap(t)
	w := &waits{}
	policy := host.RestartPolicy{Base: 40 * time.Millisecond, Cap: 100 * time.Millisecond, Attempts: 5}
	policy.After = func(d time.Duration) <-chan time.Time {
		w.record(d)
		return time.After(d)
	}
	h := startHostWith(t, cfg, host.Options{Restart: policy})

	replaceWithFailing(t, plugin)
	crashOther(t, h)
	r := waitForState(t, h, "other", registry.StateFailed, 5)

	delays, at := w.snapshot()
	want := []time.Duration{40 * time.Millisecond, 80 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}
	if !slices.Equal(delays, want) {
		t.Fatalf("backoffs %v, want %v", delays, want)
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < delays[i-1] {
			t.Errorf("attempt %d came %v after attempt %d, before its %v backoff was over", i+1, gap, i, delays[i-1])
		}
	}
	if r.Restarts != 5 || !strings.Contains(r.LastError, "gave up after 5 restart attempts") {
		t.Errorf("failed record %+v, want five attempts and the reason", r)
	}
}

// While a crashed plugin waits out its backoff, its families answer
// unavailable, retryable, not capability_not_provided: a node run that
// needs one is refused for now, and its idempotency key keeps nothing,
// so the same keyed request runs once the plugin is back. The backoff is
// held open by the test, so the window lasts as long as needed.
func TestRestartingFamilyIsUnavailableAndKeysKeepNothing(t *testing.T) {
	pluginPath := filepath.Join(t.TempDir(), "testcap")
	copyExecutable(t, bin.testcap, pluginPath, 0o755)
	cfg := writeConfig(t, `
host { plugin_dir = "BIN" }
capability "echo" {
  plugin   = "`+pluginPath+`"
  families = ["test.echo"]
}
pack "private.wophost.probe" { path = "`+probePack(t)+`" }
`)
	policy, entered, release := heldRestarts()
	h := startHostWith(t, cfg, host.Options{Restart: policy})
	if _, err := h.Call(context.Background(), "test.echo", "exit", json.RawMessage(`{}`), host.RunOptions{}); wop.CodeOf(err) != wop.CodeUnavailable {
		t.Fatalf("the crashing call: %v, want unavailable", err)
	}
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no restart backoff began within 30 s of the crash")
	}
	if r := capRecord(h, "echo"); r.State != registry.StateRestarting {
		t.Fatalf("during the backoff: %+v, want restarting", r)
	}
	retryable := func(what string, err error) {
		t.Helper()
		we := wop.AsError(err)
		if we == nil || we.Code != wop.CodeUnavailable || !we.Retryable || we.Capability != "host.test.echo" {
			t.Errorf("%s while its plugin restarts: %v, want unavailable, retryable, naming host.test.echo", what, err)
		}
	}
	_, err := h.Call(context.Background(), "test.echo", "echo", json.RawMessage(`{}`), host.RunOptions{})
	retryable("test.echo.echo", err)
	const keys = 8
	run := func(i int) (*host.RunResult, error) {
		return h.Run(context.Background(), "probe.echo", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			host.RunOptions{IdempotencyKey: fmt.Sprintf("plugin-restart-test-key-%02d", i), Record: true, Timeout: time.Minute})
	}
	for i := range keys {
		_, err := run(i)
		retryable(fmt.Sprintf("keyed run %d", i), err)
	}

	close(release)
	waitForState(t, h, "echo", registry.StateReady, 1)
	ran := 0
	for i := range keys {
		res, err := run(i)
		if err != nil {
			t.Errorf("keyed run %d once the plugin is back: %v, want it run", i, err)
			continue
		}
		if !res.Replayed {
			ran++
		}
	}
	if ran != keys {
		t.Errorf("%d of %d keys ran once the plugin was back; the others answered a kept outcome", ran, keys)
	}
}

// packRecord returns what the host shows of the pack named name.
func packRecord(h *host.Host, name string) host.PackInfo {
	for _, p := range h.Packs() {
		if p.Name == name {
			return p
		}
	}
	return host.PackInfo{}
}

// A crashed pack is restarted with the plugins' policy: the same backoffs
// and five attempts, then failed.
func TestPackRestartPolicyGivesUpAfterFiveAttempts(t *testing.T) {
	packDir := probePack(t)
	cfg := writeConfig(t, `
host { plugin_dir = "BIN" }
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" { path = "`+packDir+`" }
`)
	w := &waits{}
	h := startHostWith(t, cfg, host.Options{Restart: w.skipping()})

	pidfile := filepath.Join(t.TempDir(), "pids")
	go func() {
		// The run is cut short by the kill below; its answer does not matter.
		_, _ = h.Run(context.Background(), "probe.sleep",
			json.RawMessage(`{"ms":60000,"inPack":true,"pidfile":"`+pidfile+`"}`), host.RunOptions{Timeout: time.Minute})
	}()
	pids := readPIDs(t, pidfile)
	replaceWithFailing(t, filepath.Join(packDir, "probe"))
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pack to be given up", func() bool { return packRecord(h, "private.wophost.probe").State == host.PackFailed })

	p := packRecord(h, "private.wophost.probe")
	delays, _ := w.snapshot()
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	if !slices.Equal(delays, want) {
		t.Errorf("pack backoffs %v, want %v", delays, want)
	}
	if p.Restarts != 5 || !strings.Contains(p.Error, "gave up after 5 restart attempts, the last: start pack binary") {
		t.Errorf("pack %+v, want five restarts and the reason", p)
	}
}

// A plugin the host gave up on says why the last attempt failed, not only
// that it gave up: here the binary no longer matches the block's sha256
// pin, which the log names and so must host plugins.
func TestGivenUpPluginSaysTheLastAttemptsCause(t *testing.T) {
	pluginPath := filepath.Join(t.TempDir(), "testcap")
	copyExecutable(t, bin.testcap, pluginPath, 0o755)
	b, err := os.ReadFile(pluginPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf(`
host { plugin_dir = "BIN" }
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "other" {
  plugin   = "%s"
  sha256   = "%x"
  families = ["test.other"]
}
`, pluginPath, sha256.Sum256(b)))
	h := startHostWith(t, cfg, host.Options{Restart: (&waits{}).skipping()})

	replaceWithFailing(t, pluginPath)
	crashOther(t, h)
	r := waitForState(t, h, "other", registry.StateFailed, 5)
	if !strings.Contains(r.LastError, "gave up after 5 restart attempts, the last: ") || !strings.Contains(r.LastError, "does not match the pin") {
		t.Errorf("last error %q does not say the last attempt failed on the sha256 pin", r.LastError)
	}
}

// A plugin that exits on its own is reported with the last it wrote to
// stderr, not as "exited unexpectedly" alone.
func TestExitedPluginSaysItsLastWords(t *testing.T) {
	cfg, _ := ownTestcap(t)
	h := startHostWith(t, cfg, host.Options{Restart: (&waits{}).skipping()})
	crashOther(t, h)
	r := waitForState(t, h, "other", registry.StateReady, 1)
	if want := "plugin process exited unexpectedly; the last it wrote to stderr: testcap: exiting with status 7 on request"; !strings.Contains(r.LastError, want) {
		t.Errorf("last error %q, want it to carry %q", r.LastError, want)
	}
}
