package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// go-plugin's guesses at a failed handshake and the words of a lost
// connection, which say nothing of the process.
var startGuesses = []string{"Unrecognized remote plugin message", "This usually means", "error reading from server"}

// pythonImportError is a plugin written as a script whose interpreter
// cannot load what it needs, as a Python plugin missing a package does.
const pythonImportError = "#!/bin/sh\necho \"ImportError: No module named 'grpc_health'\" >&2\nexit 1\n"

// startFailure is one plugin that fails before it is ready, and what the
// host must say about it.
type startFailure struct {
	name string
	// block is the capability block's body.
	block string
	// plugin is the executable and env the conformance file's plugin
	// block names, and its config block.
	plugin, env, config string
	phase               string
	// reason is the error's text after "started: " or "configured: ".
	reason string
}

func startFailures(t *testing.T) []startFailure {
	script := filepath.Join(t.TempDir(), "python-plugin")
	if err := os.WriteFile(script, []byte(pythonImportError), 0o755); err != nil {
		t.Fatal(err)
	}
	return []startFailure{
		{name: "early", block: "plugin = \"testcap\"\n  env    = { TESTCAP_START = \"exit\" }",
			plugin: bin.testcap, env: `{ TESTCAP_START = "exit" }`, phase: "started",
			reason: "the process exited before completing its handshake (exit status 3); the last it wrote to stderr: testcap: cannot read /etc/testcap/model.bin: no such file or directory"},
		{name: "python", block: "plugin = \"" + script + "\"",
			plugin: script, phase: "started",
			reason: "the process exited before completing its handshake (exit status 1); the last it wrote to stderr: ImportError: No module named 'grpc_health'"},
		{name: "badrecord", block: "plugin = \"testcap\"\n  env    = { TESTCAP_START = \"bad-record\" }",
			plugin: bin.testcap, env: `{ TESTCAP_START = "bad-record" }`, phase: "started",
			reason: `the process exited before completing its handshake (exit status 1); the last it wrote to stderr: invalid plugin definition: family "test.echo": until: required for a family that is experimental (a protocol version "N.N" or a date YYYY-MM-DD)`},
		{name: "licensed", block: "plugin   = \"testcap\"\n  families = [\"test.other\"]\n  config { exit_configure = true }",
			plugin: bin.testcap, config: "config {\n  exit_configure = true\n}", phase: "configured",
			reason: "the process exited during Configure (exit status 4); the last it wrote to stderr: testcap: the licence server refused key TC-0000"},
	}
}

// pluginLocation is where the plugin attribute of capability name's
// block in the config at cfg begins, as file:line:col.
func pluginLocation(t *testing.T, cfg, name string) string {
	t.Helper()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for i, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "capability ") {
			in = strings.HasPrefix(l, fmt.Sprintf("capability %q", name))
		}
		if in && strings.HasPrefix(strings.TrimSpace(l), "plugin ") {
			c := strings.Index(l, `"`)
			return fmt.Sprintf("%s:%d:%d", cfg, i+1, c+1)
		}
	}
	t.Fatalf("no plugin attribute for %s in %s", name, cfg)
	return ""
}

// checkReason fails unless text holds the reason and none of go-plugin's
// guesses.
func checkReason(t *testing.T, where, text, reason string) {
	t.Helper()
	if !strings.Contains(text, reason) {
		t.Errorf("%s lacks %q:\n%s", where, reason, text)
	}
	for _, g := range startGuesses {
		if strings.Contains(text, g) {
			t.Errorf("%s holds %q:\n%s", where, g, text)
		}
	}
}

// A plugin that exits before it is ready, a Go plugin whose definition
// the SDK refuses, a script whose interpreter lacks a package, a plugin
// that exits during Configure, is reported in its own last words, at the
// plugin attribute of its block, in host validate, host plugins, GET
// /v1/plugins (and the log of host serve at its default level) and host
// conformance; go-plugin's guesses are not. A pack whose entry exits so is
// reported so too.
func TestPluginThatExitsBeforeReadySaysWhy(t *testing.T) {
	cases := startFailures(t)
	pack := probePack(t)
	entry := filepath.Join(pack, "probe")
	if err := os.WriteFile(entry, []byte(pythonImportError), 0o755); err != nil {
		t.Fatal(err)
	}
	// The pack's peer, so that it is refused for its entry alone.
	text := "host {\n  plugin_dir = \"BIN\"\n  http {\n    listen = \"127.0.0.1:0\"\n  }\n}\n" +
		"capability \"echo\" {\n  plugin   = \"testcap\"\n  families = [\"test.echo\"]\n}\n"
	for _, c := range cases {
		text += fmt.Sprintf("capability %q {\n  %s\n}\n", c.name, c.block)
	}
	text += "pack \"private.wophost.probe\" {\n  path = \"" + pack + "\"\n  sandbox { enabled = false }\n}\n"
	cfg := writeConfig(t, text)

	res := runHost(t, "", "--config", cfg, "validate")
	if res.code != 1 {
		t.Fatalf("host validate: exit %d, want 1\n%s", res.code, res.stderr)
	}
	for _, c := range cases {
		loc := pluginLocation(t, cfg, c.name)
		if !strings.Contains(res.stderr, "on "+loc+fmt.Sprintf(" (in capability %q)", c.name)) {
			t.Errorf("host validate does not point at %s for %s:\n%s", loc, c.name, res.stderr)
		}
		checkReason(t, "host validate", res.stderr, c.phase+": "+c.reason)
	}
	res = runHost(t, "", "--config", cfg, "--json", "validate")
	var v struct{ Problems []string }
	if err := json.Unmarshal([]byte(res.stdout), &v); err != nil {
		t.Fatalf("host validate --json: %v\n%s", err, res.stdout)
	}
	for _, c := range cases {
		loc := pluginLocation(t, cfg, c.name)
		found := false
		for _, p := range v.Problems {
			if strings.HasPrefix(p, loc+": ") && strings.Contains(p, c.phase+": "+c.reason) {
				found = true
			}
		}
		if !found {
			t.Errorf("host validate --json has no problem at %s saying %q: %q", loc, c.reason, v.Problems)
		}
	}
	if state, errText := packState(t, cfg, "private.wophost.probe"); state != "refused" ||
		!strings.Contains(errText, "the process exited before completing its handshake (exit status 1); the last it wrote to stderr: ImportError: No module named 'grpc_health'") {
		t.Errorf("pack: %s, %q; want refused in its entry's own words", state, errText)
	}

	check := func(where string, recs map[string]record) {
		t.Helper()
		for _, c := range cases {
			r := recs[c.name]
			want := pluginLocation(t, cfg, c.name) + ": " + c.phase + ": " + c.reason
			if r.State != "failed" || r.FailedPhase != c.phase || r.LastError != want {
				t.Errorf("%s: %s is %s (%s) with %q; want failed (%s) with %q", where, c.name, r.State, r.FailedPhase, r.LastError, c.phase, want)
			}
		}
	}
	check("host plugins", pluginRecords(t, cfg))
	d := startServe(t, cfg)
	r := request(t, "GET", d.base+"/v1/plugins", "", nil)
	var recs []record
	if err := json.Unmarshal([]byte(r.body), &recs); r.status != 200 || err != nil {
		t.Fatalf("GET /v1/plugins: %d %v\n%s", r.status, err, r.body)
	}
	byName := map[string]record{}
	for _, rec := range recs {
		byName[rec.Name] = rec
	}
	check("GET /v1/plugins", byName)
	for _, c := range cases {
		checkReason(t, "the log of host serve", d.log(), c.reason)
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("host serve: exit %d after SIGTERM:\n%s", code, d.log())
	}

	for _, c := range cases {
		t.Run("conformance/"+c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "conformance.hcl")
			body := "plugin {\n  executable = \"" + c.plugin + "\"\n"
			if c.env != "" {
				body += "  env        = " + c.env + "\n"
			}
			body += "}\n" + c.config + "\ncall \"test.echo.echo\" {\n  input = { a = 1 }\n}\n"
			if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			res := runHost(t, "", "conformance", "--config", file)
			if res.code != 1 {
				t.Fatalf("exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
			}
			// The plugin block is the file's first.
			if !strings.Contains(res.stdout, ": "+file+":1:1: ") {
				t.Errorf("the failure is not placed at the plugin block, %s:1:1:\n%s", file, res.stdout)
			}
			checkReason(t, "host conformance", res.stdout, c.reason)
		})
	}
}
