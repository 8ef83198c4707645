package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/plugin"
)

// Out-of-range settings are refused by the schema's constraints, with the
// attribute's path, before Configure runs.
func TestConfigConstraints(t *testing.T) {
	s := newPlugin().ConfigSchema
	for cfg, path := range map[string]string{
		`{"mailbox_capacity": 0}`:              "mailbox_capacity",
		`{"spawn_quota": -1}`:                  "spawn_quota",
		`{"max_rounds": 2.5}`:                  "max_rounds",
		`{"limits": {"turns": 0}}`:             "limits.turns",
		`{"max_limits": {"timeout_ms": 1e30}}`: "max_limits.timeout_ms",
	} {
		err := plugin.CheckConfig(s, json.RawMessage(cfg))
		ces, ok := err.(plugin.ConfigErrors)
		if !ok || len(ces) != 1 || strings.Join(ces[0].Path, ".") != path {
			t.Errorf("%s: %v, want one error at %s", cfg, err, path)
		}
	}
	if err := plugin.CheckConfig(s, json.RawMessage(`{"spawn_quota": 0, "limits": {"tool_calls": 0, "timeout_ms": 60000}}`)); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
}
