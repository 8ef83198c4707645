package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wophost/wophost/test/testbin"
)

// badPluginPkg is the kit's bad plugin, which breaks the rule
// BADPLUGIN_BREAK names.
const badPluginPkg = "github.com/wophost/wophost/sdk/plugintest/internal/badplugin"

// layOut links the binaries of pkgs into a fresh directory under the
// names given, as make build lays them out in bin/, and returns it.
func layOut(t *testing.T, pkgs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, pkg := range pkgs {
		if err := os.Symlink(binary(t, pkg), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Every plugin of the repository passes `host conformance` with its
// conformance file: the protocol rules and its core family's contract
// rules, each on a row of its own with its text.
func TestConformanceOnEveryPlugin(t *testing.T) {
	tests := []struct {
		file, exe, pkg string
		// rules must each be on a PASS row.
		rules []string
	}{
		{"examples/plugins/hello/conformance.hcl", "wophost-hello", "./examples/plugins/hello", []string{"Protocol/Invoke/acme.hello.greet#01"}},
		{"examples/plugins/kv/conformance.hcl", "wophost-kv", "./examples/plugins/kv", []string{"Protocol/Invoke/acme.kv.get#01"}},
		{"plugins/aienvelope/conformance.hcl", "wophost-aienvelope", "./plugins/aienvelope", []string{"aiEnvelope/Await", "aiEnvelope/JSONOutput"}},
		{"plugins/promptlib/conformance.hcl", "wophost-promptlib", "./plugins/promptlib", []string{"promptLibrary/Pinned", "promptLibrary/DigestMismatch"}},
		{"plugins/mcp/conformance.hcl", "wophost-mcp", "./plugins/mcp", []string{"mcp/toolbox/CallTool", "mcp/toolbox/MCPError"}},
		{"plugins/agentrt/conformance.hcl", "wophost-agentrt", "./plugins/agentrt", []string{"agentRuntime/MessageSend", "agentRuntime/Delegate"}},
	}
	for _, tc := range tests {
		t.Run(tc.exe, func(t *testing.T) {
			dir := layOut(t, map[string]string{tc.exe: tc.pkg, "mcpserver-toolbox": "./examples/mcpservers/toolbox"})
			res := runHost(t, "", "conformance", "--config", testbin.SourceDir(tc.file), filepath.Join(dir, tc.exe))
			if res.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
			}
			if !regexp.MustCompile(`(?m)^RULE +RESULT +TEXT$`).MatchString(res.stdout) ||
				!regexp.MustCompile(`(?m)^Protocol/Describe +PASS +Describe answers a name`).MatchString(res.stdout) ||
				!regexp.MustCompile(`(?m)^\d+ rules: \d+ passed, 0 failed, 0 skipped$`).MatchString(res.stdout) {
				t.Errorf("no table of passed rules:\n%s", res.stdout)
			}
			for _, r := range append(tc.rules, "Protocol/KeepsServing") {
				if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(r) + ` +PASS +\S`).MatchString(res.stdout) {
					t.Errorf("rule %s is not a PASS row with its text:\n%s", r, res.stdout)
				}
			}
		})
	}
}

// A plugin that breaks a rule fails `host conformance` with exit 1, and
// the report names the rule and what broke it, in the table and in JSON.
func TestConformanceNamesTheBrokenRule(t *testing.T) {
	bad := binary(t, badPluginPkg)
	tests := []struct{ brk, rule, detail string }{
		{"record", "Protocol/Describe", `family test.bad: status "bogus": must be one of stable, experimental, deprecated`},
		{"malformed-payload", "Protocol/Errors/MalformedPayload", `with the malformed payload "{" succeeded; want code validation_error`},
		{"unknown-family", "Protocol/Errors/UnknownFamily", "an unknown family succeeded; want code not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.brk, func(t *testing.T) {
			args := []string{"conformance", "--env", "BADPLUGIN_BREAK=" + tc.brk, "--call", `test.bad.echo={"a":1}`, bad}
			res := runHost(t, "", args...)
			if res.code != 1 {
				t.Fatalf("exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
			}
			if !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(tc.rule)+` +FAIL +\S`).MatchString(res.stdout) ||
				!regexp.MustCompile(`(?m)^FAIL `+regexp.QuoteMeta(tc.rule)+`: .*`+regexp.QuoteMeta(tc.detail)).MatchString(res.stdout) {
				t.Errorf("the report does not name %s with %q:\n%s", tc.rule, tc.detail, res.stdout)
			}
			if n := strings.Count(res.stdout, "\nFAIL "); n != 1 {
				t.Errorf("%d failures listed, want only %s:\n%s", n, tc.rule, res.stdout)
			}

			res = runHost(t, "", append([]string{"--json"}, args...)...)
			var out struct {
				OK    bool `json:"ok"`
				Rules []struct {
					Rule, Text, Detail, Result string
					OK                         bool
				} `json:"rules"`
			}
			if err := json.Unmarshal([]byte(res.stdout), &out); err != nil || res.code != 1 {
				t.Fatalf("--json: exit %d, %v\n%s", res.code, err, res.stdout)
			}
			found := false
			for _, r := range out.Rules {
				if r.Rule == tc.rule {
					found = !r.OK && r.Result == "fail" && strings.Contains(r.Detail, tc.detail) && r.Text != ""
				}
			}
			if out.OK || !found {
				t.Errorf("--json does not fail %s with %q: %s", tc.rule, tc.detail, res.stdout)
			}
		})
	}
}

// Usage errors exit 2 before any plugin starts: no sample call, or a
// conformance file with an error, shown with its place.
func TestConformanceUsageErrors(t *testing.T) {
	if res := runHost(t, "", "conformance", bin.kv); res.code != 2 || !strings.Contains(res.stderr, "no sample call") {
		t.Errorf("no call: exit %d\n%s", res.code, res.stderr)
	}
	file := filepath.Join(t.TempDir(), "conformance.hcl")
	if err := os.WriteFile(file, []byte("call \"get\" {\n  input = {}\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runHost(t, "", "conformance", "--config", file, bin.kv)
	if res.code != 2 || !strings.Contains(res.stderr, "conformance.hcl:1:1") || !strings.Contains(res.stderr, `"family.method"`) {
		t.Errorf("bad call label: exit %d\n%s", res.code, res.stderr)
	}
}

// The host refuses to advertise a family whose record breaks OpenWOP's
// rules: the capability fails, and `host plugins` says which field.
func TestHostRefusesAnInvalidFamilyRecord(t *testing.T) {
	bad := binary(t, badPluginPkg)
	cfg := writeConfig(t, `
capability "bogus" {
  plugin = "`+bad+`"
  env    = { BADPLUGIN_BREAK = "record" }
}
capability "good" {
  plugin = "`+bad+`"
}
`)
	recs := pluginRecords(t, cfg)
	if r := recs["bogus"]; r.State != "failed" || !strings.Contains(r.LastError, `describes family "test.bad" with an invalid record: status "bogus": must be one of stable, experimental, deprecated`) {
		t.Errorf("bogus: state %s, error %q", r.State, r.LastError)
	}
	if r := recs["good"]; r.State != "ready" {
		t.Errorf("good: state %s, error %q", r.State, r.LastError)
	}
}

// An interpreted plugin is checked through its launcher, which its
// conformance file names: here a shell script that runs the kv plugin,
// as a Node plugin's launcher runs node on its script.
func TestConformanceThroughALauncher(t *testing.T) {
	dir := layOut(t, map[string]string{"kv-real": "./examples/plugins/kv"})
	launcher := "#!/bin/sh\nexec \"$(dirname \"$0\")/kv-real\" \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "launcher.sh"), []byte(launcher), 0o755); err != nil {
		t.Fatal(err)
	}
	kv, err := os.ReadFile(testbin.SourceDir("examples/plugins/kv/conformance.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "conformance.hcl")
	if err := os.WriteFile(file, append([]byte("plugin {\n  executable = \"./launcher.sh\"\n}\n"), kv...), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runHost(t, "", "conformance", "--config", file)
	if res.code != 0 || !regexp.MustCompile(`(?m)^26 rules: 26 passed, 0 failed, 0 skipped$`).MatchString(res.stdout) {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
}
