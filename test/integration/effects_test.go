package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `host effects` lists one seam per side-effecting method of the real
// plugins: kv's put and delete but not get, which the plugin declares
// pure, and aiEnvelope's generate as a provider call; --json is the
// manifest GET /host/effect-seams serves.
func TestEffectsListsTheSideEffectingMethods(t *testing.T) {
	cfg := writeConfig(t, fmt.Sprintf(`
host { plugin_dir = "BIN" }
capability "kv" {
  plugin = "wophost-kv"
  config { file = "demo.db" }
}
capability "ai" {
  plugin = %q
  config {
%s
  }
}
`, binary(t, "./plugins/aienvelope"), localAI))
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg), "rules.json"), []byte(aiRules), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runHost(t, "", "--config", cfg, "--json", "effects")
	if res.code != 0 {
		t.Fatalf("host effects --json: exit %d\n%s", res.code, res.stderr)
	}
	var m struct {
		ManifestVersion string `json:"manifestVersion"`
		Host            struct{ Name, Build string }
		Seams           []struct {
			Seam, Kind, GuardedBy, Note string
			Guarded, BranchReFires      bool
		}
	}
	if err := json.Unmarshal([]byte(res.stdout), &m); err != nil {
		t.Fatalf("decode: %v\n%s", err, res.stdout)
	}
	var seams []string
	for _, s := range m.Seams {
		seams = append(seams, s.Seam+"="+s.Kind)
		if !s.Guarded || !s.BranchReFires || s.GuardedBy == "" || s.Note == "" {
			t.Errorf("seam %+v: want guarded, re-fired by a branch, with guardedBy and a note", s)
		}
	}
	want := "acme.kv.delete=other acme.kv.put=other aiEnvelope.await=provider-sdk aiEnvelope.generate=provider-sdk"
	if got := strings.Join(seams, " "); got != want || m.ManifestVersion != "1" || m.Host.Name != "wophost" || m.Host.Build == "" {
		t.Fatalf("manifest %q %+v seams %s\nwant seams %s", m.ManifestVersion, m.Host, got, want)
	}

	res = runHost(t, "", "--config", cfg, "effects")
	if res.code != 0 || !strings.HasPrefix(res.stdout, "SEAM") || !strings.Contains(res.stdout, "acme.kv.put") || strings.Contains(res.stdout, "acme.kv.get") {
		t.Fatalf("host effects: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}
