package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wophost/wophost/sdk/plugintest"
)

// binary builds the plugin into the test's temporary directory; the
// build cache keeps repeated builds quick.
func binary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "wophost-agentrt")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

const spawnPayload = `{"manifest":{"id":"helper","name":"Helper","description":"Helps.","systemPromptRef":"helper@1","toolAllowlist":[]},"idempotencyKey":"conformance"}`

// The plugin passes the protocol conformance kit, run against the built
// binary exactly as a vendor would run it against theirs.
func TestConformance(t *testing.T) {
	plugintest.Run(t, plugintest.Config{
		Binary: binary(t),
		Config: json.RawMessage(`{"mailbox_capacity":4}`),
		Calls: []plugintest.Call{{Family: "agentRuntime", Method: "spawn", Payload: json.RawMessage(spawnPayload),
			Check: func(t testing.TB, res json.RawMessage) {
				var r struct{ AgentInstanceID, ManifestDigest string }
				if err := json.Unmarshal(res, &r); err != nil || r.AgentInstanceID == "" || r.ManifestDigest == "" {
					t.Errorf("spawn = %s, %v", res, err)
				}
			}}},
	})
}

// The plugin passes the agentRuntime family checks.
func TestAgentRuntimeFamily(t *testing.T) {
	plugintest.AgentRuntime(t, plugintest.AgentRuntimeConfig{
		Binary:          binary(t),
		Config:          json.RawMessage(`{"mailbox_capacity":3}`),
		MailboxCapacity: 3,
	})
}

// A bad config is refused with the attribute's path.
func TestConfigRefused(t *testing.T) {
	p := plugintest.Start(t, plugintest.Config{Binary: binary(t)})
	cases := map[string][]string{
		`{"mailbox_capacity":0}`:          {"mailbox_capacity"},
		`{"limits":{"turns":0}}`:          {"limits", "turns"},
		`{"max_limits":{"timeout_ms":0}}`: {"max_limits", "timeout_ms"},
		`{"store_file":"../x.db"}`:        {"store_file"},
	}
	for cfg, path := range cases {
		res, err := p.ConfigureErr(t.Context(), json.RawMessage(cfg))
		if err != nil {
			t.Fatalf("%s: %v", cfg, err)
		}
		if len(res.Diagnostics) == 0 {
			t.Errorf("%s accepted", cfg)
			continue
		}
		if got := res.Diagnostics[0].Path; len(got) != len(path) || got[0] != path[0] || got[len(got)-1] != path[len(path)-1] {
			t.Errorf("%s: path %q, want %q", cfg, got, path)
		}
	}
}
