package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// alive reports whether pid is a live process (zombies count as gone: they
// are waiting for a reaper, not running).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func readPIDs(t *testing.T, path string) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(waitForFile(t, path)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file %s: %v", path, err)
		}
		pids = append(pids, n)
	}
	if len(pids) != 2 {
		t.Fatalf("pid file %s holds %v, want the pack's and the plugin's pid", path, pids)
	}
	return pids
}

func assertGone(t *testing.T, what string, pids []int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		left := 0
		for _, p := range pids {
			if alive(p) {
				left++
			}
		}
		if left == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range pids {
		if alive(p) {
			t.Errorf("%s: process %d outlived the host", what, p)
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// No plugin or pack process outlives `host run`, whether the node
// succeeds, fails or times out.
func TestNoProcessOutlivesHostRun(t *testing.T) {
	cfg := probeConfig(t, "")
	dir := t.TempDir()
	cases := []struct {
		name, typeID, input string
		args                []string
		wantCode            int
	}{
		{"success", "probe.call", `{"family":"test.echo","method":"echo","pidfile":"PIDFILE"}`, nil, 0},
		{"failure", "probe.call", `{"family":"test.echo","method":"fail","pidfile":"PIDFILE"}`, nil, 1},
		// The node writes its pidfile before it sleeps, so the run's timeout
		// is generous enough for the host and the pack to start and the node
		// to get there on a loaded machine.
		{"timeout", "probe.sleep", `{"ms":600000,"inPack":true,"pidfile":"PIDFILE"}`, []string{"--timeout", "20s"}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pidfile := filepath.Join(dir, c.name)
			input := strings.ReplaceAll(c.input, "PIDFILE", pidfile)
			args := append([]string{"--config", cfg, "run", c.typeID, "--input", "-"}, c.args...)
			res := runHost(t, input, args...)
			if res.code != c.wantCode {
				t.Fatalf("exit %d, want %d\n%s\n%s", res.code, c.wantCode, res.stdout, res.stderr)
			}
			if _, err := os.Stat(pidfile); err != nil {
				t.Fatalf("the node never wrote its pidfile: %v\n%s", err, res.stderr)
			}
			assertGone(t, c.name, readPIDs(t, pidfile))
		})
	}
}

// Even a host killed with SIGKILL leaves nothing behind: the SDKs watch
// their parent and exit.
func TestNoProcessOutlivesKilledHost(t *testing.T) {
	cfg := probeConfig(t, "")
	pidfile := filepath.Join(t.TempDir(), "pids")
	cmd := exec.Command(bin.host, "--config", cfg, "run", "probe.sleep", "--input", "-")
	cmd.Stdin = strings.NewReader(`{"ms":60000,"inPack":true,"pidfile":"` + pidfile + `"}`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pids := readPIDs(t, pidfile)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	assertGone(t, "after SIGKILL of the host", pids)
}

// Every kind of config error names file:line:col, and one validate run
// reports all of them.
func TestConfigErrorsNameFileLineCol(t *testing.T) {
	cases := map[string]struct {
		config string
		want   []string
	}{
		"unknown attribute": {`host {
  plugin_dir = "BIN"
  colour = "blue"
}
`, []string{"host.hcl:3:3", "Unsupported argument"}},
		"wrong type": {`host {
  plugin_dir = "BIN"
  call_depth_limit = ["x"]
}
`, []string{"host.hcl:3:22"}},
		"missing plugin": {`capability "x" {
  plugin = "BIN/nope"
}
`, []string{"host.hcl:2:12", "nope"}},
		"bad sha256": {`capability "x" {
  plugin = "BIN/testcap"
  sha256 = "abc"
}
`, []string{"host.hcl:3:12", "sha256"}},
		"bad plugin config body": {`capability "x" {
  plugin = "BIN/testcap"
  config {
    greeting = "hi"
    colour   = "blue"
    fail_configure = "maybe"
  }
}
`, []string{"host.hcl:5:5", "Unsupported argument", "host.hcl:6:22"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := writeConfig(t, c.config)
			res := runHost(t, "", "--config", cfg, "validate")
			if res.code != 1 {
				t.Fatalf("validate exit %d, want 1\n%s", res.code, res.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("output lacks %q:\n%s", w, res.stderr)
				}
			}
		})
	}

	all := writeConfig(t, `host {
  plugin_dir = "BIN"
  colour = "blue"
}
capability "a" { plugin = "nope" }
capability "b" {
  plugin = "testcap"
  sha256 = "abc"
}
`)
	res := runHost(t, "", "--config", all, "validate")
	if res.code != 1 {
		t.Fatalf("validate exit %d, want 1", res.code)
	}
	for _, w := range []string{"host.hcl:3:3", "host.hcl:8:12"} {
		if !strings.Contains(res.stderr, w) {
			t.Errorf("one run should report every problem; lacks %q:\n%s", w, res.stderr)
		}
	}
}

func TestValidateReportsPluginProblemsAndSucceedsWhenClean(t *testing.T) {
	bad := writeConfig(t, `capability "a" { plugin = "BIN/nope" }
capability "b" {
  plugin   = "BIN/testcap"
  families = ["test.echo"]
  config { fail_configure = true }
}
`)
	res := runHost(t, "", "--config", bad, "validate")
	if res.code != 1 || !strings.Contains(res.stderr, "host.hcl:1:27") || !strings.Contains(res.stderr, "host.hcl:5:29") {
		t.Errorf("validate of plugin problems: exit %d\n%s", res.code, res.stderr)
	}
	good := probeConfig(t, "")
	res = runHost(t, "", "--config", good, "validate")
	if res.code != 0 || !strings.Contains(res.stdout, "no problems") {
		t.Errorf("validate of a good config: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// A plugin's schema constraints are checked by the host where the operator
// wrote the value: the MCP plugin's max_rounds range, through the real
// binaries.
func TestPluginConstraintAtFileLineCol(t *testing.T) {
	mcpBin := binary(t, "./plugins/mcp")
	cfg := writeConfig(t, `capability "mcp" {
  plugin = "`+mcpBin+`"
  config {
    max_rounds = 17
  }
}
`)
	res := runHost(t, "", "--config", cfg, "validate")
	if res.code != 1 {
		t.Fatalf("validate exit %d, want 1\n%s", res.code, res.stderr)
	}
	for _, want := range []string{"host.hcl:4:18", "max_rounds must be a whole number from 1 to 16, got 17"} {
		if !strings.Contains(res.stderr+res.stdout, want) {
			t.Errorf("output lacks %q:\n%s%s", want, res.stdout, res.stderr)
		}
	}
}
