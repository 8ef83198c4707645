package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/plugintest"
	"github.com/wophost/wophost/sdk/schema"
)

// kvSchema is a config schema like the kv example's, with a nested block.
var kvSchema = schema.Block{
	Attributes: []schema.Attribute{{Name: "file", Type: schema.String}, {Name: "max_value_bytes", Type: schema.Number}},
	Blocks: []schema.NestedBlock{{TypeName: "async", Nesting: schema.NestingSingle, Block: schema.Block{
		Attributes: []schema.Attribute{{Name: "enabled", Type: schema.Bool}},
	}}},
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const conformanceHCL = `
plugin {
  executable    = "launcher.sh"
  args          = ["-x"]
  env           = { MODE = "strict" }
  start_timeout = "20s"
}
config {
  file            = "kv.db"
  max_value_bytes = 16
}
call "acme.kv.put" {
  input = { key = "k", value = "v" }
}
call "acme.kv.get" {
  input  = jsonencode({ key = "k" })
  expect = { value = "v" }
}
call "acme.kv.get" {
  input       = { key = "missing" }
  expect_code = "acme.key_not_found"
}
family "aiEnvelope" {
  async_config {
    async { enabled = true }
  }
  json_schema  = { type = "object" }
  user_message = "Hi."
}
family "promptLibrary" {
  config { file = abspath("store") }
  prompt {
    name    = "demo/system"
    version = "1"
    raw     = "---\nname: demo/system\n---\nBe brief.\n"
  }
}
family "mcp" {
  server_id      = "toolbox"
  tool           = "add"
  tool_arguments = { a = 1 }
}
family "mcp" {
  server_id = "other"
  tool      = "echo"
}
family "agentRuntime" {
  mailbox_capacity = 3
}
`

// The conformance file gives the kit its suite: the config blocks decoded
// against the plugin's schema as the host decodes them, the calls with
// their payloads and expectations, and each family's settings.
func TestConformanceFile(t *testing.T) {
	path := writeFile(t, "conformance.hcl", conformanceHCL)
	cf, diags := loadConformanceFile(path)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if cf.executable != filepath.Join(filepath.Dir(path), "launcher.sh") || len(cf.args) != 1 || cf.args[0] != "-x" {
		t.Errorf("executable %s %q: want launcher.sh beside the file", cf.executable, cf.args)
	}
	if !cf.needsSchema(nil) {
		t.Error("a file with a config block needs no schema")
	}
	s, diags := cf.resolve("/bin/plugin", []string{"a"}, kvSchema, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	c := s.Config
	if c.Binary != "/bin/plugin" || len(c.Args) != 1 || c.StartTimeout != 20*time.Second || len(c.Env) != 1 || c.Env[0] != "MODE=strict" {
		t.Errorf("plugin: %+v", c)
	}
	if string(c.Config) != `{"async":null,"file":"kv.db","max_value_bytes":16}` {
		t.Errorf("config %s", c.Config)
	}
	if len(c.Calls) != 3 {
		t.Fatalf("calls %+v", c.Calls)
	}
	put, get, missing := c.Calls[0], c.Calls[1], c.Calls[2]
	if put.Family != "acme.kv" || put.Method != "put" || string(put.Payload) != `{"key":"k","value":"v"}` {
		t.Errorf("put %+v", put)
	}
	if string(get.Payload) != `{"key":"k"}` || string(get.WantResult) != `{"value":"v"}` || get.WantCode != "" {
		t.Errorf("get %+v", get)
	}
	if missing.WantCode != "acme.key_not_found" {
		t.Errorf("missing %+v", missing)
	}
	if a := s.AIEnvelope; a == nil || a.Config != nil || string(a.AsyncConfig) != `{"async":{"enabled":true},"file":null,"max_value_bytes":null}` ||
		string(a.JSONSchema) != `{"type":"object"}` || a.UserMessage != "Hi." {
		t.Errorf("aiEnvelope %+v", s.AIEnvelope)
	}
	want := `{"async":null,"file":"` + filepath.Join(filepath.Dir(path), "store") + `","max_value_bytes":null}`
	if p := s.PromptLibrary; p == nil || string(p.Config) != want || len(p.Prompts) != 1 || p.Prompts[0].Raw != "---\nname: demo/system\n---\nBe brief.\n" {
		t.Errorf("promptLibrary %+v; want config %s", s.PromptLibrary, want)
	}
	if len(s.MCP) != 2 || s.MCP[0].ServerID != "toolbox" || string(s.MCP[0].ToolArguments) != `{"a":1}` || s.MCP[1].Tool != "echo" {
		t.Errorf("mcp %+v", s.MCP)
	}
	if s.AgentRuntime == nil || s.AgentRuntime.MailboxCapacity != 3 {
		t.Errorf("agentRuntime %+v", s.AgentRuntime)
	}
	// --plugin-config replaces the config block.
	s, _ = cf.resolve("/bin/plugin", nil, kvSchema, json.RawMessage(`{"x":1}`))
	if string(s.Config.Config) != `{"x":1}` {
		t.Errorf("--plugin-config: %s", s.Config.Config)
	}
}

// The JSON form of a conformance file is HCL's JSON syntax: the same
// blocks, the same suite.
func TestConformanceFileJSON(t *testing.T) {
	path := writeFile(t, "conformance.json", `{
  "config": {"file": "kv.db"},
  "call": {"acme.kv.get": [
    {"input": {"key": "k"}},
    {"input": "{\"key\":\"missing\"}", "expect_code": "acme.key_not_found"}
  ]}
}`)
	cf, diags := loadConformanceFile(path)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	s, diags := cf.resolve("/bin/plugin", nil, kvSchema, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if string(s.Config.Config) != `{"async":null,"file":"kv.db","max_value_bytes":null}` || len(s.Calls) != 2 ||
		string(s.Calls[0].Payload) != `{"key":"k"}` || string(s.Calls[1].Payload) != `{"key":"missing"}` || s.Calls[1].WantCode != "acme.key_not_found" {
		t.Errorf("suite %+v", s.Config)
	}
}

// Each mistake in a conformance file is a diagnostic at its place.
func TestConformanceFileErrors(t *testing.T) {
	tests := map[string]struct{ text, want, at string }{
		"label":       {`call "get" {}`, `A call block's label is "family.method"`, ":1,1-"},
		"input":       {"call \"a.b\" {\n  input = \"{\"\n}", "is not valid JSON", ":2,11-"},
		"both":        {"call \"a.b\" {\n  expect = {}\n  expect_code = \"x.y\"\n}", "not both", ":1,1-"},
		"family":      {`family "kv" {}`, "a core family: aiEnvelope, promptLibrary, mcp, agentRuntime", ":1,1-"},
		"twice":       {"family \"aiEnvelope\" {}\nfamily \"aiEnvelope\" {}", "only mcp may have several blocks", ":2,1-"},
		"no prompt":   {`family "promptLibrary" {}`, "one prompt block each", ":1,1-"},
		"mcp":         {`family "mcp" { tool = "add" }`, `The argument "server_id" is required`, ":1,"},
		"timeout":     {"plugin {\n  start_timeout = \"soon\"\n}", "positive duration", ":2,19-"},
		"unknown":     {`calls "a.b" {}`, `Blocks of type "calls" are not expected here`, ":1,1-"},
		"no function": {"call \"a.b\" {\n  input = nope(1)\n}", `There is no function named "nope"`, ":2,11-"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, diags := loadConformanceFile(writeFile(t, "c.hcl", tc.text))
			if !diags.HasErrors() {
				t.Fatalf("no error for %q", tc.text)
			}
			got := diags.Error()
			if !strings.Contains(got, tc.want) || !strings.Contains(got, "c.hcl"+tc.at) {
				t.Errorf("diagnostics %q; want %q at %q", got, tc.want, tc.at)
			}
		})
	}
}

func TestParseCallFlag(t *testing.T) {
	c, err := parseCallFlag(`acme.kv.get={"key":"k=v"}`)
	if err != nil || c.Family != "acme.kv" || c.Method != "get" || string(c.Payload) != `{"key":"k=v"}` {
		t.Errorf("%+v, %v", c, err)
	}
	if c, err := parseCallFlag("mcp.listTools"); err != nil || c.Family != "mcp" || c.Payload != nil {
		t.Errorf("%+v, %v", c, err)
	}
	for _, bad := range []string{"get", "acme.", `a.b={`} {
		if _, err := parseCallFlag(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Usage errors exit 2, with the file's diagnostics at their place.
func TestConformanceUsageErrors(t *testing.T) {
	bad := writeFile(t, "conformance.hcl", "call \"a.b\" {\n  input = \"{\"\n}\n")
	tests := map[string]struct {
		args []string
		want string
	}{
		"no executable": {[]string{"conformance"}, "no plugin executable"},
		"no call":       {[]string{"conformance", os.Args[0]}, "no sample call"},
		"bad call":      {[]string{"conformance", "--call", "get", os.Args[0]}, "want FAMILY.METHOD[=JSON]"},
		"bad env":       {[]string{"conformance", "--call", "a.b", "--env", "X", os.Args[0]}, `--env "X": want KEY=VALUE`},
		"bad config":    {[]string{"conformance", "--call", "a.b", "--plugin-config", "{", os.Args[0]}, "--plugin-config is not valid JSON"},
		"bad file":      {[]string{"conformance", "--config", bad, os.Args[0]}, "conformance.hcl:2:11"},
		"no such exe":   {[]string{"conformance", "--call", "a.b", "no-such-plugin-anywhere"}, "no-such-plugin-anywhere"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := execute(tc.args, strings.NewReader(""), &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("exit %d; stderr %q; want 2 and %q", code, errb.String(), tc.want)
			}
		})
	}
}

// The table shows every rule with its result and text, then what broke
// each failed rule that has no failed part; --json has the same rules.
func TestWriteReport(t *testing.T) {
	r := &plugintest.Report{Rules: []plugintest.Rule{
		{Name: "Protocol", Text: "The protocol.", Result: plugintest.Fail},
		{Name: "Protocol/Describe", Text: "Describe answers.", Result: plugintest.Fail, Detail: "version is empty\nand more", Log: "plugin said"},
		{Name: "Protocol/Invoke", Text: "Calls succeed.", Result: plugintest.Skip, Detail: "skipped: Configure failed"},
	}}
	var out, errb bytes.Buffer
	g := &globals{stdout: &out, stderr: &errb}
	if err := g.writeReport(r, true); err != nil {
		t.Fatal(err)
	}
	want := `RULE               RESULT  TEXT
Protocol           FAIL    The protocol.
Protocol/Describe  FAIL    Describe answers.
Protocol/Invoke    SKIP    Calls succeed.

FAIL Protocol/Describe: version is empty
    and more

3 rules: 0 passed, 2 failed, 1 skipped
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
	if !strings.Contains(errb.String(), "log of Protocol/Describe:\nplugin said") {
		t.Errorf("--verbose: stderr %q", errb.String())
	}
	out.Reset()
	g.json = true
	if err := g.writeReport(r, false); err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"ok":false,"rules":[{"rule":"Protocol","ok":false,"result":"fail","text":"The protocol."},` +
		`{"rule":"Protocol/Describe","ok":false,"result":"fail","text":"Describe answers.","detail":"version is empty\nand more"},` +
		`{"rule":"Protocol/Invoke","ok":true,"result":"skip","text":"Calls succeed.","detail":"skipped: Configure failed"}]}` + "\n"
	if out.String() != wantJSON {
		t.Errorf("json:\n%s\nwant:\n%s", out.String(), wantJSON)
	}
}

// An interpreter is found in PATH, and a script argument is made absolute
// since the plugin runs in its executable's directory.
func TestPluginCommand(t *testing.T) {
	script := writeFile(t, "plugin.js", "")
	t.Chdir(filepath.Dir(script))
	exe, args, err := pluginCommand("sh", []string{"plugin.js", "--flag", "not-a-file"})
	if err != nil || !filepath.IsAbs(exe) || len(args) != 3 || args[0] != script || args[1] != "--flag" || args[2] != "not-a-file" {
		t.Errorf("%s %q, %v", exe, args, err)
	}
}

// Without PLUGIN_EXECUTABLE the file's plugin block names it, relative
// to the file; a plugin that does not start fails the run, exit 1, at
// the plugin block and with what it wrote in place of the handshake.
func TestConformanceFileExecutable(t *testing.T) {
	file := writeFile(t, "conformance.hcl", "plugin {\n  executable = \"launcher.sh\"\n}\nconfig {}\ncall \"a.b\" {}\n")
	launcher := filepath.Join(filepath.Dir(file), "launcher.sh")
	if err := os.WriteFile(launcher, []byte("#!/bin/sh\necho not a handshake\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := execute([]string{"conformance", "--config", file}, strings.NewReader(""), &out, &errb)
	if code != 1 || !strings.Contains(out.String(), "FAIL Protocol: "+file+":1:1: plugintest: start "+launcher+`: the process wrote "not a handshake" to stdout`) || !strings.Contains(out.String(), "1 rule: 0 passed, 1 failed") {
		t.Errorf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if err := os.Remove(launcher); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := execute([]string{"conformance", "--config", file}, strings.NewReader(""), &out, &errb); code != 2 || !strings.Contains(errb.String(), "plugin executable: stat "+launcher) {
		t.Errorf("a missing executable: exit %d\n%s", code, errb.String())
	}
}

// The rules that failed because the plugin did not start, or exited before
// it served, are placed at the file's plugin block; no other rule is, and
// nothing is without a plugin block.
func TestStartFailuresArePlacedAtThePluginBlock(t *testing.T) {
	report := func() *plugintest.Report {
		return &plugintest.Report{Rules: []plugintest.Rule{
			{Name: "Protocol", Result: plugintest.Fail, Detail: "plugintest: start /bin/p: it exited", Err: &plugintest.StartError{Binary: "/bin/p", Err: errors.New("it exited")}},
			{Name: "aiEnvelope", Result: plugintest.Fail, Detail: "generate failed"},
			{Name: "mcp", Result: plugintest.Pass},
		}}
	}
	path := writeFile(t, "conformance.hcl", conformanceHCL)
	cf, diags := loadConformanceFile(path)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	r := report()
	cf.locateStartFailures(r)
	// conformanceHCL opens with an empty line.
	at := path + ":2:1: "
	if got := r.Rules[0].Detail; got != at+"plugintest: start /bin/p: it exited" {
		t.Errorf("the start failure reads %q, want it placed at %s", got, at)
	}
	if r.Rules[1].Detail != "generate failed" || r.Rules[2].Detail != "" {
		t.Errorf("another rule was placed: %+v", r.Rules[1:])
	}
	r = report()
	(&conformanceFile{}).locateStartFailures(r)
	if r.Rules[0].Detail != "plugintest: start /bin/p: it exited" {
		t.Errorf("placed without a plugin block: %q", r.Rules[0].Detail)
	}
}
