package config

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// fuzzSeeds are config files that reach the interesting parts of the
// decoder: every host attribute, nested blocks, functions, duplicates.
var fuzzSeeds = []string{
	`host {
  plugin_dir        = "./bin"
  state_dir         = "./state"
  log_level         = "trace"
  log_format        = "json"
  start_timeout     = "20s"
  max_message_bytes = 1048576
  call_depth_limit  = 4
  http {
    listen = "127.0.0.1:8080"
  }
}
capability "kv" {
  plugin         = "wophost-kv"
  sha256         = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
  families       = ["acme.kv"]
  required       = true
  start_timeout  = "1m"
  allow_writable = false
  config {
    token = env("HOME")
    note  = file("note.txt")
  }
}
pack "demo" { path = "packs/demo" }
`,
	`capability "a" { plugin = "x" }
capability "a" { plugin = "../x" }
host {}
host {}
`,
	`capability "" { plugin = env("WOPHOST_FUZZ_UNSET") }`,
	`capability "a" { plugin = file("../../etc/passwd") }`,
	`host { max_message_bytes = 1e400 }`,
	`host { log_level = "${upper("x")}" }`,
	"capability \"a\" {\n  plugin = \"x\"\n  families = [\"\", \"a\", \"a\"]\n}\n",
	`pack "p" { path = null }`,
	"\xff\xfe",
}

// FuzzLoad writes arbitrary bytes as host.hcl and loads them. Nothing may
// panic; every error diagnostic points into the file (file:line:col) so
// an operator can find it; rendering never fails; loading is
// deterministic.
func FuzzLoad(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "note.txt"), []byte("note"), 0o644); err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(dir, "host.hcl")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		l := NewLoader()
		cfg, diags := l.Load(path)
		if cfg == nil && !diags.HasErrors() {
			t.Fatal("no config and no error")
		}
		checkDiagnostics(t, path, diags)
		if err := WriteDiagnostics(io.Discard, l.Files(), diags); err != nil {
			t.Fatalf("render: %v", err)
		}
		for _, d := range diags {
			_ = FormatDiagnostic(d)
		}
		_, again := NewLoader().Load(path)
		if len(again) != len(diags) {
			t.Fatalf("second load gave %d diagnostics, first %d", len(again), len(diags))
		}
	})
}

// FuzzDecodePluginConfig puts arbitrary bytes inside a capability's
// config block and decodes it with a schema using every type and nesting.
// Nothing may panic; every error is placed in the file; an accepted config
// is a JSON object, and redacting it yields JSON without the sensitive
// values.
func FuzzDecodePluginConfig(f *testing.F) {
	for _, s := range []string{
		`name = "main"
port = 8080
debug = true
tags = ["a"]
labels = { team = "core" }
extra = { nested = [1, "two"] }
limits = { rps = 10, burst = 20 }
api_key = "canary-fuzz"
tls { cert = "c" }
rule { match = "x" }
provider "openai" { token = "canary-fuzz" }
hook { value = null }
plugin "p" { settings = { on = true } }`,
		`name = 1`,
		`tls {}
tls {}`,
		`provider { }`,
		`limits = { rps = "x" }`,
		`name = file("/dev/null")`,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	path := filepath.Join(dir, "host.hcl")
	s := testSchema()
	f.Fuzz(func(t *testing.T, body []byte) {
		src := append([]byte("capability \"c\" {\n  plugin = \"p\"\n  config {\n"), body...)
		src = append(src, "\n  }\n}\n"...)
		if err := os.WriteFile(path, src, 0o644); err != nil {
			t.Fatal(err)
		}
		l := NewLoader()
		cfg, diags := l.Load(path)
		if diags.HasErrors() || cfg == nil || len(cfg.Capabilities) != 1 {
			checkDiagnostics(t, path, diags)
			return
		}
		out, diags := DecodePluginConfig(cfg.Capabilities[0], s, l.EvalContext(cfg.Dir))
		checkDiagnostics(t, path, diags)
		if diags.HasErrors() {
			if out != nil {
				t.Fatal("config returned with errors")
			}
			return
		}
		var obj map[string]any
		if err := json.Unmarshal(out, &obj); err != nil {
			t.Fatalf("decoded config is not a JSON object: %v\n%s", err, out)
		}
		red := Redact(out, s.SensitivePaths())
		if !json.Valid(red) {
			t.Fatalf("redacted config is not JSON: %s", red)
		}
		var redObj map[string]any
		_ = json.Unmarshal(red, &redObj)
		if v, ok := redObj["api_key"].(string); ok && v != "(sensitive)" {
			t.Fatalf("api_key survived redaction: %q", v)
		}
	})
}

// checkDiagnostics asserts every error diagnostic names a position in the
// config file.
func checkDiagnostics(t *testing.T, path string, diags hcl.Diagnostics) {
	t.Helper()
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		if d.Summary == "" {
			t.Fatalf("diagnostic without a summary: %+v", d)
		}
		if d.Subject == nil || d.Subject.Filename != path || d.Subject.Start.Line < 1 || d.Subject.Start.Column < 1 {
			t.Fatalf("error %q (%s) does not point into %s: %+v", d.Summary, d.Detail, path, d.Subject)
		}
	}
}
