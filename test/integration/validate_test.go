package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// brokenProbePack lays out the probe pack with pack.json replaced by
// manifest and returns its directory.
func brokenProbePack(t *testing.T, manifest string) string {
	t.Helper()
	dir := probePack(t)
	if err := os.WriteFile(filepath.Join(dir, "pack.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// One validate run names every problem of a file: the host block's, a
// plugin's config block's and a pack's, each at its place, and ends with
// their count. A pack.json syntax error is at pack.json:LINE:COL.
func TestValidateReportsEveryKindOfProblemInOneRun(t *testing.T) {
	pack := brokenProbePack(t, "{\n  \"name\": \"private.wophost.probe\",\n  \"version\": \"1.0.0\",\n}\n")
	cfg := writeConfig(t, `host {
  plugin_dir = "BIN"
  colour     = "blue"
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
  config {
    greeting = 42
    volume   = 11
  }
}
capability "gone" { plugin = "nope" }
pack "private.wophost.probe" { path = "`+pack+`" }
`)
	res := runHost(t, "", "--config", cfg, "validate")
	if res.code != 1 {
		t.Fatalf("validate exit %d, want 1\n%s", res.code, res.stderr)
	}
	for _, want := range []string{
		"host.hcl:3:3", `An argument named "colour" is not expected here`, // the host block
		"host.hcl:10:5", `An argument named "volume" is not expected here`, // the plugin's config block
		"host.hcl:13:30", "Plugin not found", // a missing plugin
		"host.hcl:14:1", filepath.Join(pack, "pack.json") + ":4:1: is not valid JSON", // the pack
		"host.hcl: 4 problems\n",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("validate output lacks %q:\n%s", want, res.stderr)
		}
	}
	if !strings.HasSuffix(res.stderr, "host.hcl: 4 problems\n") {
		t.Errorf("validate output does not end with the count:\n%s", res.stderr)
	}
	// The half-valid config's plugins ran against a temporary state
	// directory, not the one the config would get by default.
	if _, err := os.Stat(filepath.Join(filepath.Dir(cfg), ".wophost")); err == nil {
		t.Error("validate of a config with errors created its state directory")
	}

	js := runHost(t, "", "--config", cfg, "--json", "validate")
	var out struct {
		Valid    bool     `json:"valid"`
		Count    int      `json:"count"`
		Problems []string `json:"problems"`
	}
	if err := json.Unmarshal([]byte(js.stdout), &out); err != nil || js.code != 1 {
		t.Fatalf("validate --json: exit %d, %v\n%s", js.code, err, js.stdout)
	}
	if out.Valid || out.Count != 4 || len(out.Problems) != 4 {
		t.Errorf("validate --json = %+v, want 4 problems", out)
	}
}

// Two plugins claiming one family stop the host, and the plugins' config
// blocks and the packs are checked all the same.
func TestValidateReportsPluginConfigBesideAClaimConflict(t *testing.T) {
	pack := brokenProbePack(t, `{"name": "private.wophost.probe", "version": "1.0.0", "kind": "node", "colour": 1, "engines": {"openwop": ">=2.0 <3.0.0"},
 "runtime": {"language": "go", "entry": "probe"}, "nodes": [{"typeId": "probe.x", "version": "1.0.0", "category": "data", "role": "pure"}]}`)
	cfg := writeConfig(t, `host { plugin_dir = "BIN" }
capability "first" { plugin = "testcap" }
capability "second" {
  plugin = "testcap"
  config { fail_configure = "maybe" }
}
pack "private.wophost.probe" { path = "`+pack+`" }
`)
	res := runHost(t, "", "--config", cfg, "validate")
	if res.code != 1 {
		t.Fatalf("validate exit %d, want 1\n%s", res.code, res.stderr)
	}
	for _, want := range []string{
		"Two plugins claim one family",
		"host.hcl:5:29", // fail_configure is not a bool
		"host.hcl:7:1", "/colour: is not a known field",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("validate output lacks %q:\n%s", want, res.stderr)
		}
	}
	if !strings.HasSuffix(res.stderr, "host.hcl: 4 problems\n") {
		t.Errorf("validate output does not end with the count of 4:\n%s", res.stderr)
	}
}

// pack.json problems are listed one a line, in the validate output and in
// the log of a command that starts the host.
func TestPackProblemsOneALine(t *testing.T) {
	pack := brokenProbePack(t, `{"name": "Test", "version": "1.0.0", "kind": "nodes", "engines": {"openwop": ">=2.0 <3.0.0"},
 "runtime": {"language": "go", "entry": "probe"}, "nodes": [{"typeId": "probe.x", "version": "1.0.0", "category": "data", "role": "pure"}]}`)
	cfg := writeConfig(t, `host { plugin_dir = "BIN" }
capability "echo" { plugin = "testcap" }
pack "private.wophost.probe" { path = "`+pack+`" }
`)
	wantLines := []string{
		"pack.json is invalid (2 problems):",
		`    /name: must be a scope (core, vendor, community or private) and at least two lowercase-led segments, e.g. "community.acme.demo"`,
		`    /kind: is "nodes"; this host loads node packs only: write "kind": "node"`,
	}
	res := runHost(t, "", "--config", cfg, "validate")
	for _, want := range wantLines {
		if grepLines(res.stderr, want) == "" {
			t.Errorf("validate output has no line with %q:\n%s", want, res.stderr)
		}
	}
	logged := runHost(t, "", "--config", cfg, "packs")
	for _, want := range wantLines {
		want = strings.TrimPrefix(want, "  ") // the log indents by two, the diagnostic by four
		if !strings.Contains(logged.stderr, want+"\n") {
			t.Errorf("the log has no line %q:\n%s", want, logged.stderr)
		}
	}
}

// A clean config ends with "no problems".
func TestValidateCleanConfigSaysNoProblems(t *testing.T) {
	res := runHost(t, "", "--config", probeConfig(t, ""), "validate")
	if res.code != 0 || !strings.Contains(res.stdout, "host.hcl: no problems; 2 of 2 capabilities ready, 1 of 1 packs loaded\n") {
		t.Errorf("validate of a clean config: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// host validate reads the schema files a pack.json names: a missing one is
// a problem of the pack, at its field.
func TestValidateChecksSchemaReferences(t *testing.T) {
	pack := probePack(t)
	if err := os.Remove(filepath.Join(pack, "schemas", "validated.input.json")); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, `host { plugin_dir = "BIN" }
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" { path = "`+pack+`" }
`)
	res := runHost(t, "", "--config", cfg, "validate")
	want := fmt.Sprintf(`/nodes/%d/inputSchemaRef: "schemas/validated.input.json" does not exist in the pack directory`,
		nodeIndex(t, pack, "schemas/validated.input.json"))
	if res.code != 1 || !strings.Contains(res.stderr, want) || !strings.HasSuffix(res.stderr, "host.hcl: 1 problem\n") {
		t.Errorf("validate: exit %d, want 1 naming %q\n%s", res.code, want, res.stderr)
	}
}

// nodeIndex returns the index in the pack's pack.json of the node whose
// inputSchemaRef is ref, as the host's problems name it.
func nodeIndex(t *testing.T, pack, ref string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(pack, "pack.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Nodes []struct {
			InputSchemaRef string `json:"inputSchemaRef"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for i, n := range m.Nodes {
		if n.InputSchemaRef == ref {
			return i
		}
	}
	t.Fatalf("no node of %s has inputSchemaRef %s", pack, ref)
	return -1
}
