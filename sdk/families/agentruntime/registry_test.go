package agentruntime

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func agentJSON(id string, handoff ...string) json.RawMessage {
	m := map[string]any{"id": id, "name": id, "description": "d", "systemPromptRef": "p@1", "toolAllowlist": []string{}}
	if len(handoff) > 0 {
		m["handoff"] = map[string]any{"targets": handoff}
	}
	b, _ := json.Marshal(m)
	return b
}

func TestParsePackAgents(t *testing.T) {
	ms, err := ParsePackAgents([]json.RawMessage{agentJSON("a", "b"), agentJSON("b", "shared")}, func(id string) bool { return id == "shared" })
	if err != nil || len(ms) != 2 || ms[0].ID != "a" || ms[1].ID != "b" {
		t.Fatalf("ParsePackAgents = %v, %v", ms, err)
	}
	_, err = ParsePackAgents([]json.RawMessage{
		agentJSON("a", "ghost"),
		agentJSON("a"),
		json.RawMessage(`{"id":"c"}`),
	}, nil)
	var me *ManifestError
	if !errors.As(err, &me) {
		t.Fatalf("error = %v", err)
	}
	text := err.Error()
	for _, want := range []string{"/agents/0/handoff/targets/0: no agent \"ghost\"", "/agents/1/id: repeats", "/agents/2/name: is required"} {
		if !strings.Contains(text, want) {
			t.Errorf("error %q lacks %q", text, want)
		}
	}
}
