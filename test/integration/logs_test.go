package integration

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/internal/logdedup"
	"github.com/wophost/wophost/test/testbin"
)

// In JSON logs, every line about a call carries the run and node ids: the
// plugin's own line, and the host's line about a failed call.
func TestCallLogLinesCarryRunAndNodeIDs(t *testing.T) {
	cfg := writeConfig(t, `
host {
  plugin_dir = "BIN"
  log_format = "json"
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" { path = "`+probePack(t)+`" }
`)
	var lines []map[string]any
	for _, method := range []string{"log", "fail"} {
		res := runHost(t, `{"family":"test.echo","method":"`+method+`"}`, "--config", cfg, "--log-level", "debug", "run", "probe.call", "--input", "-")
		for _, line := range strings.Split(res.stderr, "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["@message"] != nil {
				lines = append(lines, m)
			}
		}
	}
	var pluginLine, failureLine map[string]any
	for _, m := range lines {
		switch m["@message"] {
		case "handled a log call":
			pluginLine = m
		case "host-service call refused or failed":
			failureLine = m
		}
	}
	for name, m := range map[string]map[string]any{"the plugin's line": pluginLine, "the host's failure line": failureLine} {
		if m == nil {
			t.Fatalf("%s is missing from the log", name)
		}
		run, _ := m["run_id"].(string)
		node, _ := m["node_id"].(string)
		if !strings.HasPrefix(run, "run_") || !strings.HasPrefix(node, "node_") {
			t.Errorf("%s lacks run and node ids: %v", name, m)
		}
	}
}

// A plugin that writes the same warning on every call (its upstream
// down) fills the host's log with one line per 10 s window and its count,
// not one line per call, though each call's run id differs.
func TestRepeatedPluginWarningIsCollapsed(t *testing.T) {
	cfg := writeConfig(t, `
host { plugin_dir = "BIN" }
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" { path = "`+probePack(t)+`" }
`)
	logs := &lockedLog{}
	h := startHostLogged(t, cfg, logs)
	const calls = 100
	start := time.Now()
	for i := range calls {
		if _, err := h.Run(context.Background(), "probe.call", json.RawMessage(`{"family":"test.echo","method":"warn"}`), host.RunOptions{Timeout: 30 * time.Second}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	// Each window that began writes its first line and, at its end, one
	// with the count: however slow the machine, two lines a window.
	windows := int(time.Since(start)/logdedup.Window) + 1
	if n := strings.Count(logs.String(), "the upstream refused the call"); n < 1 || n > 2*windows {
		t.Errorf("%d lines of the warning for %d calls within %d windows of 10 s, want 1 to %d:\n%s", n, calls, windows, 2*windows, logs)
	}
}

// What a plugin and a pack write to their stderr is logged under the name
// of their capability and pack, as the protocol says, not under the
// descriptor or the launcher the host execs. The pack is contained where
// the kernel allows, so that the launcher is what the host execs.
func TestProcessLinesAreLoggedUnderTheirName(t *testing.T) {
	pack := filepath.Join(t.TempDir(), "probe")
	if err := testbin.LayOutPack("test/packs/probe", bin.testcap, pack); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, `
host { plugin_dir = "BIN" }
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" {
  path = "`+pack+`"
  env  = { TESTCAP_START = "exit" }
}
`)
	res := runHost(t, "{}", "--config", cfg, "--log-level", "debug", "call", "test.echo.log", "--input", "-")
	if res.code != 0 {
		t.Fatalf("host call: exit %d\n%s", res.code, res.stderr)
	}
	for message, name := range map[string]string{
		"handled a log call": "host.echo",
		"testcap: cannot read /etc/testcap/model.bin: no such file or directory": "host.private.wophost.probe",
	} {
		n := 0
		for _, l := range strings.Split(res.stderr, "\n") {
			if !strings.Contains(l, "] ") || !strings.Contains(l, message) || strings.Contains(l, "the last it wrote") {
				continue
			}
			n++
			if !regexp.MustCompile(`\]\s+` + regexp.QuoteMeta(name+": "+message)).MatchString(l) {
				t.Errorf("%q is logged under another name than %s: %s", message, name, l)
			}
		}
		if n == 0 {
			t.Errorf("%q is not logged:\n%s", message, res.stderr)
		}
	}
}

// --log-level reaches what the host starts: a plugin and a pack filter
// their lines by the level the host gives them, so the flag must win over
// the config's log_level for them as it does for the host, in both
// directions.
func TestLogLevelFlagReachesPluginsAndPacks(t *testing.T) {
	cfg := func(level string) string {
		return writeConfig(t, `
host {
  plugin_dir = "BIN"
  log_level  = "`+level+`"
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" { path = "`+probePack(t)+`" }
`)
	}
	const pluginLine, packLine = "handled a debug call", "probe calling"
	for _, c := range []struct {
		name, level string
		flag        []string
		want        bool
	}{
		{"flag debug over config info", "info", []string{"--log-level", "debug"}, true},
		{"config info alone", "info", nil, false},
		{"config debug alone", "debug", nil, true},
		{"flag info over config debug", "debug", []string{"--log-level", "info"}, false},
	} {
		args := append(append([]string{"--config", cfg(c.level)}, c.flag...), "run", "probe.call", "--input", "-")
		res := runHost(t, `{"family":"test.echo","method":"debug"}`, args...)
		if res.code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, res.code, res.stderr)
		}
		for _, line := range []string{pluginLine, packLine} {
			if got := strings.Contains(res.stderr, line); got != c.want {
				t.Errorf("%s: the log holds %q: %v, want %v; stderr:\n%s", c.name, line, got, c.want, res.stderr)
			}
		}
	}
}
