package integration

import (
	"encoding/json"
	"strings"
	"testing"
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
