package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/plugintest"
)

// buildPlugin builds this plugin's binary for the checks that drive it
// through go-plugin, exactly as the host does.
func buildPlugin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "wophost-aienvelope")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func TestConformance(t *testing.T) {
	bin := buildPlugin(t)
	t.Run("Protocol", func(t *testing.T) {
		plugintest.Run(t, plugintest.Config{
			Binary: bin,
			Config: json.RawMessage(`{}`),
			Calls: []plugintest.Call{{Family: aienvelope.Family, Method: aienvelope.MethodGenerate,
				Payload: json.RawMessage(`{"envelopeType":"conformance","userMessage":"hello","idempotencyKey":"conformance-1"}`)}},
		})
	})
	t.Run("Family", func(t *testing.T) {
		plugintest.AIEnvelope(t, plugintest.AIEnvelopeConfig{
			Binary:      bin,
			Config:      json.RawMessage(`{}`),
			AsyncConfig: json.RawMessage(`{"async":{"enabled":true}}`),
			JSONSchema:  json.RawMessage(`{"type":"object","required":["greeting"],"properties":{"greeting":{"type":"string","minLength":1}}}`),
		})
	})
}
