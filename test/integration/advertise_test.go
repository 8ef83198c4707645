package integration

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wophost/wophost/core/host"
)

type record struct {
	Name        string   `json:"name"`
	State       string   `json:"state"`
	FailedPhase string   `json:"failedPhase"`
	LastError   string   `json:"lastError"`
	Advertised  []string `json:"advertised"`
	PluginName  string   `json:"pluginName"`
}

func pluginRecords(t *testing.T, cfg string) map[string]record {
	t.Helper()
	res := runHost(t, "", "--config", cfg, "--json", "plugins")
	if res.code != 0 {
		t.Fatalf("host plugins: exit %d\n%s", res.code, res.stderr)
	}
	var recs []record
	if err := json.Unmarshal([]byte(res.stdout), &recs); err != nil {
		t.Fatalf("decode plugins: %v\n%s", err, res.stdout)
	}
	out := map[string]record{}
	for _, r := range recs {
		out[r.Name] = r
	}
	return out
}

// Each broken capability withdraws only its own family; the reason shows
// in `host plugins`, and the advertisement is exactly the ready set.
func TestAdvertisementIsExactlyTheReadySet(t *testing.T) {
	junk := writeJunkPlugin(t)
	cfg := writeConfig(t, `
host { plugin_dir = "BIN" }
capability "good" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "badconfig" {
  plugin   = "testcap"
  families = ["test.other"]
  config { fail_configure = true }
}
capability "missing" { plugin = "no-such-plugin" }
capability "pinned" {
  plugin = "wophost-kv"
  sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
}
capability "junk" { plugin = "`+junk+`" }
`)
	recs := pluginRecords(t, cfg)
	want := map[string]struct{ state, phase, errPart string }{
		"good":      {"ready", "", ""},
		"badconfig": {"failed", "configured", "host.hcl:10:29: Configuration refused"},
		"missing":   {"failed", "verified", "no-such-plugin"},
		"pinned":    {"failed", "verified", "expected 0000000000000000000000000000000000000000000000000000000000000000, actual "},
		"junk":      {"failed", "started", "this is not a handshake"},
	}
	for name, w := range want {
		r, ok := recs[name]
		if !ok {
			t.Errorf("capability %s missing from host plugins", name)
			continue
		}
		if r.State != w.state || r.FailedPhase != w.phase {
			t.Errorf("%s: state %s (%s), want %s (%s); error: %s", name, r.State, r.FailedPhase, w.state, w.phase, r.LastError)
		}
		if w.errPart != "" && !strings.Contains(r.LastError, w.errPart) {
			t.Errorf("%s: last error %q lacks %q", name, r.LastError, w.errPart)
		}
	}
	if got := recs["pinned"].LastError; !strings.Contains(got, "actual ") || len(got) < 64*2 {
		t.Errorf("sha256 mismatch should show both sums: %q", got)
	}

	res := runHost(t, "", "--config", cfg, "--json", "capabilities")
	if res.code != 0 {
		t.Fatalf("host capabilities: exit %d\n%s", res.code, res.stderr)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil {
		t.Fatalf("decode advertisement: %v\n%s", err, res.stdout)
	}
	var ext map[string]json.RawMessage
	if err := json.Unmarshal(doc["extensions"], &ext); err != nil {
		t.Fatalf("extensions: %v", err)
	}
	// Beside the plugins' families, the host's own record of how it
	// contains packs (host.FamilySandbox), which no plugin serves.
	if len(ext) != 2 || ext["test.echo"] == nil || ext[host.FamilySandbox] == nil {
		t.Fatalf("advertised extensions = %s, want exactly test.echo and %s", doc["extensions"], host.FamilySandbox)
	}
	for _, core := range []string{"aiEnvelope", "promptLibrary", "agentRuntime", "agents", "mcp"} {
		if _, ok := doc[core]; ok {
			t.Errorf("%s advertised without a plugin", core)
		}
	}
	wantEcho := `{"status":"experimental","since":"2.0","until":"2027-06-30","witness":"claims-check","echo":{},"sleep":{"maxMs":60000}}`
	if string(ext["test.echo"]) != wantEcho {
		t.Errorf("test.echo record = %s\nwant %s", ext["test.echo"], wantEcho)
	}
	// Stable bytes: a second host with the same plugins prints the same
	// document.
	again := runHost(t, "", "--config", cfg, "--json", "capabilities")
	if again.stdout != res.stdout {
		t.Errorf("advertisement bytes changed between runs:\n%s\n%s", res.stdout, again.stdout)
	}
}

// Two capability blocks serving one family is a config error naming both.
func TestTwoPluginsClaimingOneFamily(t *testing.T) {
	cfg := writeConfig(t, `
host { plugin_dir = "BIN" }
capability "first" { plugin = "testcap" }
capability "second" {
  plugin   = "testcap"
  families = ["test.echo"]
}
`)
	res := runHost(t, "", "--config", cfg, "validate")
	if res.code != 1 {
		t.Fatalf("validate exit %d, want 1\n%s", res.code, res.stderr)
	}
	for _, part := range []string{"Two plugins claim one family", `"test.echo"`, `"first"`, `"second"`, "host.hcl:3:1", "host.hcl:4:1"} {
		if !strings.Contains(res.stderr, part) {
			t.Errorf("validate output lacks %q:\n%s", part, res.stderr)
		}
	}
}

// A value the plugin marks sensitive never reaches a log line, even at
// trace level.
func TestSensitiveConfigNeverLogged(t *testing.T) {
	cfg := writeConfig(t, `
host { plugin_dir = "BIN" }
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
  config {
    greeting = "hi"
    token    = "s3cret-t0ken"
  }
}
`)
	res := runHost(t, "", "--config", cfg, "--log-level", "trace", "plugins")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if strings.Contains(res.stderr+res.stdout, "s3cret-t0ken") {
		t.Fatalf("the sensitive value reached the output:\n%s", res.stderr)
	}
	if !strings.Contains(res.stderr, `\"token\":\"(sensitive)\"`) || !strings.Contains(res.stderr, `\"greeting\":\"hi\"`) {
		t.Errorf("the decoded config should be logged with the token redacted:\n%s", res.stderr)
	}
}
