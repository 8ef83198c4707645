package config

import (
	"maps"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnvAttribute(t *testing.T) {
	t.Setenv("WOPHOST_TEST_SECRET", "s3cret-canary")
	f := newFixture(t, `capability "kv" {
  plugin = "wophost-kv"
  env = {
    HTTPS_PROXY = "http://proxy:3128"
    API_KEY     = env("WOPHOST_TEST_SECRET")
    "LC_ALL"    = "C"
    PORT        = 8080
    DEBUG       = true
  }
}
capability "plain" {
  plugin = "wophost-kv"
}
pack "demo" {
  path = "packs/demo"
  env  = { GREETING = "hi" }
}
`)
	cfg, _ := mustLoad(t, f)
	want := map[string]string{"HTTPS_PROXY": "http://proxy:3128", "API_KEY": "s3cret-canary", "LC_ALL": "C", "PORT": "8080", "DEBUG": "true"}
	if got := cfg.Capabilities[0].Env; !maps.Equal(got, want) {
		t.Errorf("capability env = %v, want %v", got, want)
	}
	if got := cfg.Capabilities[1].Env; got != nil {
		t.Errorf("a block without env has %v, want nil", got)
	}
	if got := cfg.Packs[0].Env; !maps.Equal(got, map[string]string{"GREETING": "hi"}) {
		t.Errorf("pack env = %v", got)
	}
}

func TestEnvAttributeJSON(t *testing.T) {
	f := newFixture(t, "")
	path := filepath.Join(f.dir, "host.hcl.json")
	writeFile(t, path, `{"capability": {"kv": {"plugin": "wophost-kv", "env": {"A": "1", "B": "two"}}}}`, 0o644)
	cfg, diags := NewLoader().Load(path)
	if diags.HasErrors() {
		t.Fatalf("unexpected diagnostics: %q", summaries(diags))
	}
	if got := cfg.Capabilities[0].Env; !maps.Equal(got, map[string]string{"A": "1", "B": "two"}) {
		t.Errorf("env = %v", got)
	}
}

// Every problem of an env attribute is reported at the name or value
// concerned, and no value appears in a diagnostic.
func TestEnvAttributeDiagnostics(t *testing.T) {
	t.Setenv("WOPHOST_TEST_SECRET", "s3cret-canary")
	tests := []struct {
		name    string
		env     string // the attribute's value, written at line 3, column 9
		summary string
		detail  string
		line    int
		col     int
	}{
		{"not an object", `["A=1"]`, "Invalid env", "must be an object", 3, 9},
		{"a string", `"A=1"`, "Invalid env", "must be an object", 3, 9},
		{"bad name", `{ "1ABC" = "x" }`, "Invalid env variable name", `"1ABC"`, 3, 11},
		{"name with a dash", "{\n    \"MY-VAR\" = \"x\"\n  }", "Invalid env variable name", `"MY-VAR"`, 4, 5},
		{"empty name", `{ "" = "x" }`, "Invalid env variable name", `""`, 3, 11},
		{"reserved protocol name", `{ WOPHOST_LOG_LEVEL = "trace" }`, "Reserved env variable", "WOPHOST_LOG_LEVEL", 3, 11},
		{"reserved go-plugin name", `{ PLUGIN_CLIENT_CERT = env("WOPHOST_TEST_SECRET") }`, "Reserved env variable", "PLUGIN_CLIENT_CERT", 3, 11},
		{"duplicate", "{\n    A = \"1\"\n    A = env(\"WOPHOST_TEST_SECRET\")\n  }", "Duplicate env variable", "host.hcl:4:5", 5, 5},
		{"null value", `{ A = null }`, "Invalid env value", "A is null", 3, 15},
		{"list value", `{ A = ["x"] }`, "Invalid env value", "must be a string", 3, 15},
		{"NUL in a value", `{ A = "x\u0000y" }`, "Invalid env value", "NUL", 3, 15},
		{"unset env()", `{ A = env("WOPHOST_TEST_UNSET") }`, "Invalid function argument", "WOPHOST_TEST_UNSET", 3, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "capability \"kv\" {\n  plugin = \"wophost-kv\"\n  env = "+tt.env+"\n}\n")
			l := NewLoader()
			_, diags := l.Load(f.path)
			if len(diags) != 1 {
				t.Fatalf("want one diagnostic, got %q", summaries(diags))
			}
			d := diags[0]
			if d.Summary != tt.summary || !strings.Contains(d.Detail, tt.detail) {
				t.Errorf("diagnostic %q: %q, want %q mentioning %q", d.Summary, d.Detail, tt.summary, tt.detail)
			}
			assertPos(t, tt.name, *d.Subject, f.path, tt.line, tt.col)
			if out := renderString(t, l, diags); strings.Contains(out, "s3cret-canary") {
				t.Errorf("a secret value reached the diagnostic:\n%s", out)
			}
		})
	}
}

func TestIsEnvName(t *testing.T) {
	for name, want := range map[string]bool{
		"PATH": true, "_x": true, "a1_B2": true, "": false, "1A": false, "A-B": false, "A.B": false, "A=B": false, "É": false,
	} {
		if got := isEnvName(name); got != want {
			t.Errorf("isEnvName(%q) = %v, want %v", name, got, want)
		}
	}
}
