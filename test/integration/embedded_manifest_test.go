package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
)

// startProbeWithManifest lays out the probe pack, rewrites the pack.json
// beside its binary with edit, starts a host with it and returns the
// host's diagnostics.
func startProbeWithManifest(t *testing.T, edit func(m map[string]any)) string {
	t.Helper()
	dir := probePack(t)
	path := filepath.Join(dir, "pack.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	// Indented differently from the embedded copy, keys sorted.
	out, err := json.MarshalIndent(m, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := writeConfig(t, `
host {
  plugin_dir = "BIN"
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" { path = "`+dir+`" }
`)
	cfg, ldr, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		t.Fatalf("config: %s", config.FormatDiagnostics(diags))
	}
	h := host.New(cfg, ldr, hclog.NewNullLogger(), "test")
	rep := h.Start(context.Background())
	t.Cleanup(h.Close)
	return config.FormatDiagnostics(rep.All())
}

// The host refuses a pack whose binary was built with another pack.json
// than the one beside it: the host would otherwise validate and route by
// a manifest the pack's code does not follow. Formatting alone is no
// difference.
func TestPackBinaryMustEmbedThePackJSONBesideIt(t *testing.T) {
	t.Run("different", func(t *testing.T) {
		diags := startProbeWithManifest(t, func(m map[string]any) { m["version"] = "1.0.1" })
		if !strings.Contains(diags, "was built with a different pack.json than") || !strings.Contains(diags, "pack_validation_failed") {
			t.Errorf("a pack.json that differs from the embedded one: diagnostics %q; want pack_validation_failed saying the binary was built with a different pack.json", diags)
		}
	})
	t.Run("reformatted", func(t *testing.T) {
		if diags := startProbeWithManifest(t, func(map[string]any) {}); diags != "" {
			t.Errorf("a reformatted but equal pack.json: diagnostics %q; want none", diags)
		}
	})
}
