package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wophost/wophost/plugins/promptlib/store"
	"github.com/wophost/wophost/sdk/plugintest"
	"github.com/wophost/wophost/sdk/wop"
)

// buildPlugin builds this plugin into a temporary directory.
func buildPlugin(t *testing.T) string {
	t.Helper()
	binary := filepath.Join(t.TempDir(), "wophost-promptlib")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return binary
}

// seed publishes raws into a fresh store and returns its directory.
func seed(t *testing.T, raws ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "prompts")
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range raws {
		if _, err := s.Publish(context.Background(), []byte(raw)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The plugin passes the protocol kit and the promptLibrary family checks,
// run against the built binary as a vendor would run them against theirs.
func TestConformance(t *testing.T) {
	binary := buildPlugin(t)
	prompts := []plugintest.StoredPrompt{
		{Name: "demo/system", Version: "1", Raw: "---\nname: demo/system\n---\nBe brief, précis, exact.\r\n  "},
		{Name: "team/triage", Version: "2.1.0", Raw: "---\r\nname: team/triage\r\nversion: 2.1.0\r\n---\r\nSort tickets.\r\n"},
		{Name: "big", Version: "1", Raw: "---\nname: big\n---\n" + strings.Repeat("ünïcödé line with trailing space \n", 1<<20/33+1)},
	}
	var raws []string
	for _, p := range prompts {
		raws = append(raws, p.Raw)
	}
	config, err := json.Marshal(map[string]string{"dir": seed(t, raws...)})
	if err != nil {
		t.Fatal(err)
	}
	plugintest.Run(t, plugintest.Config{
		Binary: binary,
		Config: config,
		Calls: []plugintest.Call{
			{Family: "promptLibrary", Method: "get", Payload: json.RawMessage(`{"promptId":"demo/system@1"}`)},
		},
	})
	plugintest.PromptLibrary(t, plugintest.PromptLibraryConfig{Binary: binary, Config: config, Prompts: prompts})
}

// The same checks pass with the plugin served inside the test's process,
// as a vendor's unit test would run them: no binary.
func TestConformanceInProcess(t *testing.T) {
	prompts := []plugintest.StoredPrompt{{Name: "demo/system", Version: "1", Raw: "---\nname: demo/system\n---\nBe brief.\n"}}
	config, err := json.Marshal(map[string]string{"dir": seed(t, prompts[0].Raw)})
	if err != nil {
		t.Fatal(err)
	}
	plugintest.Run(t, plugintest.Config{
		InProcess: newPlugin(),
		Config:    config,
		Calls:     []plugintest.Call{{Family: "promptLibrary", Method: "get", Payload: json.RawMessage(`{"promptId":"demo/system@1"}`)}},
	})
	plugintest.PromptLibrary(t, plugintest.PromptLibraryConfig{InProcess: newPlugin(), Config: config, Prompts: prompts})
}

// The default store lives in the plugin's state directory, and an empty
// dir is refused with a diagnostic naming the attribute.
func TestConfig(t *testing.T) {
	binary := buildPlugin(t)
	p := plugintest.Start(t, plugintest.Config{Binary: binary})
	res, err := p.ConfigureErr(t.Context(), json.RawMessage(`{"dir":""}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Diagnostics) != 1 || strings.Join(res.Diagnostics[0].Path, ".") != "dir" {
		t.Errorf("empty dir: diagnostics %v", res.Diagnostics)
	}
	p.Configure(t, nil)
	if _, err := p.Invoke(t.Context(), "promptLibrary", "get", json.RawMessage(`{"promptId":"none@1"}`), wopCall()); err == nil {
		t.Error("an empty default store answered a get")
	}
}

func wopCall() wop.CallContext { return wop.CallContext{RunID: "test", Depth: 1} }
