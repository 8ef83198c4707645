package config

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/wophost/wophost/sdk/schema"
)

// testSchema exercises every attribute type family and nesting mode.
func testSchema() schema.Block {
	return schema.Block{
		Attributes: []schema.Attribute{
			{Name: "name", Type: schema.String, Required: true},
			{Name: "port", Type: schema.Number},
			{Name: "debug", Type: schema.Bool},
			{Name: "tags", Type: schema.ListString},
			{Name: "labels", Type: schema.MapString},
			{Name: "extra", Type: schema.Any},
			{Name: "limits", Type: "object({rps=number, burst=number})"},
			{Name: "api_key", Type: schema.String, Sensitive: true},
			{Name: "comment", Type: schema.String},
		},
		Blocks: []schema.NestedBlock{
			{TypeName: "tls", Nesting: schema.NestingSingle, Block: schema.Block{
				Attributes: []schema.Attribute{{Name: "cert", Type: schema.String, Required: true}},
			}},
			{TypeName: "rule", Nesting: schema.NestingList, Block: schema.Block{
				Attributes: []schema.Attribute{{Name: "match", Type: schema.String}},
			}},
			{TypeName: "provider", Nesting: schema.NestingMap, Block: schema.Block{
				Attributes: []schema.Attribute{
					{Name: "base_url", Type: schema.String},
					{Name: "token", Type: schema.String, Sensitive: true},
				},
			}},
			{TypeName: "hook", Nesting: schema.NestingList, Block: schema.Block{
				Attributes: []schema.Attribute{{Name: "value", Type: schema.Any}},
			}},
			{TypeName: "plugin", Nesting: schema.NestingMap, Block: schema.Block{
				Attributes: []schema.Attribute{{Name: "settings", Type: schema.Any}},
			}},
		},
	}
}

// loadCapability loads src (which must be valid) and returns its first
// capability with the loader's eval context.
func loadCapability(t *testing.T, src string) (*Capability, *hcl.EvalContext, fixture) {
	t.Helper()
	f := newFixture(t, src)
	cfg, l := mustLoad(t, f)
	if len(cfg.Capabilities) == 0 {
		t.Fatal("no capability in fixture")
	}
	return cfg.Capabilities[0], l.EvalContext(cfg.Dir), f
}

func TestDecodePluginConfig(t *testing.T) {
	const src = `capability "kv" {
  plugin = "wophost-kv"
  config {
    name    = "main"
    port    = 8080
    debug   = true
    tags    = ["a", "b"]
    labels  = { team = "core" }
    extra   = { nested = [1, "two"] }
    limits  = { rps = 10, burst = 20 }
    api_key = env("WOPHOST_TEST_KEY")

    tls {
      cert = file("cert.pem")
    }
    rule { match = "x" }
    rule { match = "y" }
    provider "openai" {
      base_url = "https://api.openai.com/v1?a=1&b=2"
      token    = "sk-1"
    }
    provider "local" {
      base_url = "http://localhost"
    }
    hook { value = 1 }
    hook { value = "two" }
    plugin "p" { settings = { on = true } }
  }
}
`
	t.Setenv("WOPHOST_TEST_KEY", "secret")
	f := newFixture(t, src)
	writeFile(t, f.dir+"/cert.pem", "PEM", 0o644)
	cfg, l := mustLoad(t, f)
	c := cfg.Capabilities[0]

	got, diags := DecodePluginConfig(c, testSchema(), l.EvalContext(cfg.Dir))
	if diags.HasErrors() {
		t.Fatalf("unexpected diagnostics:\n%s", renderString(t, l, diags))
	}
	want := `{
  "name": "main", "port": 8080, "debug": true,
  "tags": ["a", "b"], "labels": {"team": "core"},
  "extra": {"nested": [1, "two"]},
  "limits": {"rps": 10, "burst": 20},
  "api_key": "secret", "comment": null,
  "tls": {"cert": "PEM"},
  "rule": [{"match": "x"}, {"match": "y"}],
  "provider": {
    "openai": {"base_url": "https://api.openai.com/v1?a=1&b=2", "token": "sk-1"},
    "local": {"base_url": "http://localhost", "token": null}
  },
  "hook": [{"value": 1}, {"value": "two"}],
  "plugin": {"p": {"settings": {"on": true}}}
}`
	assertJSONEqual(t, got, want)

	redacted := Redact(got, testSchema().SensitivePaths())
	wantRedacted := strings.NewReplacer(`"secret"`, `"(sensitive)"`, `"sk-1"`, `"(sensitive)"`).Replace(want)
	assertJSONEqual(t, redacted, wantRedacted)
}

func TestDecodePluginConfigAbsentBlocks(t *testing.T) {
	c, ectx, _ := loadCapability(t, `capability "kv" {
  plugin = "wophost-kv"
  config {
    name = "n"
  }
}
`)
	got, diags := DecodePluginConfig(c, testSchema(), ectx)
	if diags.HasErrors() {
		t.Fatalf("unexpected diagnostics: %q", summaries(diags))
	}
	want := `{
  "name": "n", "port": null, "debug": null, "tags": null, "labels": null,
  "extra": null, "limits": null, "api_key": null, "comment": null,
  "tls": null, "rule": [], "provider": {}, "hook": [], "plugin": {}
}`
	assertJSONEqual(t, got, want)
}

func TestDecodePluginConfigDiagnostics(t *testing.T) {
	type pos struct {
		summary   string
		line, col int
	}
	tests := []struct {
		name   string
		src    string
		schema schema.Block
		want   []pos
	}{
		{
			name: "unknown attribute and missing required",
			src: `capability "kv" {
  plugin = "wophost-kv"
  config {
    nmae = "typo"
  }
}
`,
			schema: testSchema(),
			want: []pos{
				{"Missing required argument", 3, 10},
				{"Unsupported argument", 4, 5},
			},
		},
		{
			name: "wrong types",
			src: `capability "kv" {
  plugin = "wophost-kv"
  config {
    name = "n"
    port = "eighty"
    tags = "a"
  }
}
`,
			schema: testSchema(),
			want: []pos{
				{"Incorrect attribute value type", 5, 12},
				{"Incorrect attribute value type", 6, 12},
			},
		},
		{
			name: "errors inside nested blocks",
			src: `capability "kv" {
  plugin = "wophost-kv"
  config {
    name = "n"
    tls {}
    provider "a" {
      colour = "red"
    }
    provider "a" {}
  }
}
`,
			schema: testSchema(),
			want: []pos{
				{"Missing required argument", 5, 9},
				{"Unsupported argument", 7, 7},
				{"Duplicate provider block", 9, 5},
			},
		},
		{
			name: "absent config block with required attribute",
			src: `
capability "kv" {
  plugin = "wophost-kv"
}
`,
			schema: testSchema(),
			want:   []pos{{"Missing required argument", 2, 1}},
		},
		{
			name: "required blocks",
			src: `capability "kv" {
  plugin = "wophost-kv"
  config {}
}
`,
			schema: schema.Block{Blocks: []schema.NestedBlock{
				{TypeName: "one", Nesting: schema.NestingSingle, Required: true},
				{TypeName: "many", Nesting: schema.NestingList, Required: true},
				{TypeName: "named", Nesting: schema.NestingMap, Required: true},
			}},
			want: []pos{
				{"Insufficient many blocks", 3, 10},
				{"Missing named block", 3, 10},
				{"Missing one block", 3, 10},
			},
		},
		{
			name: "values outside the schema's constraints",
			src: `capability "kv" {
  plugin = "wophost-kv"
  config {
    rounds  = 1.5
    timeout = "0s"
    policy  = "maybe"
    retry {
      backoff = "soon"
    }
    server "a" {
      timeout = "-1s"
    }
  }
}
`,
			schema: schema.Block{
				Attributes: []schema.Attribute{
					{Name: "rounds", Type: schema.Number, Whole: true, Min: schema.Bound(1), Max: schema.Bound(16)},
					{Name: "timeout", Type: schema.String, Duration: true},
					{Name: "policy", Type: schema.String, OneOf: []string{"decline", "accept"}},
				},
				Blocks: []schema.NestedBlock{
					{TypeName: "retry", Nesting: schema.NestingSingle, Block: schema.Block{Attributes: []schema.Attribute{
						{Name: "backoff", Type: schema.String, Duration: true}}}},
					{TypeName: "server", Nesting: schema.NestingMap, Block: schema.Block{Attributes: []schema.Attribute{
						{Name: "timeout", Type: schema.String, Duration: true}}}},
				},
			},
			want: []pos{
				{`Invalid value for "rounds"`, 4, 15},
				{`Invalid value for "timeout"`, 5, 15},
				{`Invalid value for "policy"`, 6, 15},
				{`Invalid value for "backoff"`, 8, 17},
				{`Invalid value for "timeout"`, 11, 17},
			},
		},
		{
			name: "constraints that do not fit the type",
			src: `capability "kv" {
  plugin = "wophost-kv"
  config {}
}
`,
			schema: schema.Block{Attributes: []schema.Attribute{
				{Name: "n", Type: schema.String, Whole: true},
				{Name: "d", Type: schema.String, Duration: true, MinDuration: "1h", MaxDuration: "1m"},
			}},
			want: []pos{
				{"Invalid plugin schema", 3, 3},
				{"Invalid plugin schema", 3, 3},
			},
		},
		{
			name: "invalid schema",
			src: `capability "kv" {
  plugin = "wophost-kv"
  config {}
}
`,
			schema: schema.Block{
				Attributes: []schema.Attribute{
					{Name: "a", Type: "lst(string)"},
					{Name: "a", Type: schema.String},
				},
				Blocks: []schema.NestedBlock{{TypeName: "b", Nesting: "set"}},
			},
			want: []pos{
				{"Invalid plugin schema", 3, 3},
				{"Invalid plugin schema", 3, 3},
				{"Invalid plugin schema", 3, 3},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ectx, f := loadCapability(t, tt.src)
			got, diags := DecodePluginConfig(c, tt.schema, ectx)
			if got != nil {
				t.Errorf("JSON = %s, want nil on error", got)
			}
			if len(diags) != len(tt.want) {
				t.Fatalf("got %d diagnostics, want %d: %q", len(diags), len(tt.want), summaries(diags))
			}
			for i, w := range tt.want {
				d := diags[i]
				if d.Summary != w.summary {
					t.Errorf("diagnostic %d: summary %q, want %q", i, d.Summary, w.summary)
				}
				if d.Subject == nil {
					t.Errorf("diagnostic %d (%s) has no subject", i, d.Summary)
					continue
				}
				assertPos(t, d.Summary, *d.Subject, f.path, w.line, w.col)
			}
		})
	}
}

func TestPluginDiagnostics(t *testing.T) {
	const src = `capability "ai" {
  plugin = "wophost-kv"
  config {
    model = "m"
    headers = { "x-team" = "core" }
    rule { match = "a" }
    rule {
      match = "b"
    }
    provider "local" {
      base_url = "http://localhost"
    }
    provider "openai" {
      timeout  = "1s"
      base_url = "ftp://nope"
    }
  }
}
`
	c, _, f := loadCapability(t, src)
	tests := []struct {
		path      []string
		line, col int
		exact     bool
	}{
		{[]string{"provider", "openai", "base_url"}, 15, 18, true},
		{[]string{"provider", "openai"}, 13, 5, true},
		{[]string{"model"}, 4, 13, true},
		{[]string{"headers", "x-team"}, 5, 28, true},
		{[]string{"rule", "1", "match"}, 8, 15, true},
		{[]string{"provider", "openai", "missing"}, 13, 5, false},
		{[]string{"provider", "anthropic", "base_url"}, 10, 5, false},
		{[]string{"nothing"}, 3, 3, false},
		{nil, 3, 3, true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.path, "."), func(t *testing.T) {
			diags := PluginDiagnostics(c, []PluginDiagnostic{{Summary: "Bad value", Detail: "Explained.", Path: tt.path}})
			if len(diags) != 1 {
				t.Fatalf("got %d diagnostics", len(diags))
			}
			d := diags[0]
			if d.Severity != hcl.DiagError || d.Summary != "Bad value" {
				t.Errorf("got %v %q", d.Severity, d.Summary)
			}
			assertPos(t, "subject", *d.Subject, f.path, tt.line, tt.col)
			if mentions := strings.Contains(d.Detail, "config path:"); mentions == tt.exact {
				t.Errorf("detail %q: mentions path = %v, want %v", d.Detail, mentions, !tt.exact)
			}
		})
	}
}

func TestPluginDiagnosticsWithoutConfigBlock(t *testing.T) {
	c, _, f := loadCapability(t, "capability \"kv\" {\n  plugin = \"wophost-kv\"\n}\n")
	diags := PluginDiagnostics(c, []PluginDiagnostic{{Summary: "Need a key", Path: []string{"key"}}})
	assertPos(t, "subject", *diags[0].Subject, f.path, 1, 1)
}

func TestRedact(t *testing.T) {
	const in = `{
  "api_key": "k",
  "empty": null,
  "url": "http://x/?a=1&b=<2>",
  "n": 12345678901234567890,
  "provider": {
    "a": {"token": "t1", "base_url": "u"},
    "b": {"token": "t2", "base_url": "u", "extra": {"secret": "s"}}
  },
  "rule": [{"password": "p1"}, {"password": null}, {"other": 1}]
}`
	tests := []struct {
		name  string
		in    string
		paths [][]string
		want  string
	}{
		{
			name: "nested wildcards",
			in:   in,
			paths: [][]string{
				{"api_key"}, {"empty"},
				{"provider", "*", "token"},
				{"provider", "*", "extra", "secret"},
				{"rule", "*", "password"},
				{"absent", "*", "x"},
			},
			want: `{
  "api_key": "(sensitive)", "empty": null, "url": "http://x/?a=1&b=<2>",
  "n": 12345678901234567890,
  "provider": {
    "a": {"token": "(sensitive)", "base_url": "u"},
    "b": {"token": "(sensitive)", "base_url": "u", "extra": {"secret": "(sensitive)"}}
  },
  "rule": [{"password": "(sensitive)"}, {"password": null}, {"other": 1}]
}`,
		},
		{
			name:  "whole subtree and list index",
			in:    in,
			paths: [][]string{{"provider", "b"}, {"rule", "0"}},
			want: `{
  "api_key": "k", "empty": null, "url": "http://x/?a=1&b=<2>",
  "n": 12345678901234567890,
  "provider": {"a": {"token": "t1", "base_url": "u"}, "b": "(sensitive)"},
  "rule": ["(sensitive)", {"password": null}, {"other": 1}]
}`,
		},
		{
			name:  "invalid JSON fails closed",
			in:    `{"api_key": "k"`,
			paths: [][]string{{"api_key"}},
			want:  `"(sensitive)"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Redact(json.RawMessage(tt.in), tt.paths)
			assertJSONEqual(t, got, tt.want)
			if strings.Contains(string(got), `\u0026`) {
				t.Errorf("output is HTML-escaped: %s", got)
			}
		})
	}
}

func assertJSONEqual(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is invalid JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON mismatch\n got: %s\nwant: %s", got, want)
	}
}

// A value outside its constraints is explained in the same words whichever
// plugin declared them, and a value inside them decodes as usual.
func TestDecodePluginConfigConstraintDetail(t *testing.T) {
	s := schema.Block{Attributes: []schema.Attribute{
		{Name: "max_rounds", Type: schema.Number, Whole: true, Min: schema.Bound(1), Max: schema.Bound(16)},
		{Name: "timeout", Type: schema.String, Duration: true},
	}}
	c, ectx, _ := loadCapability(t, "capability \"kv\" {\n  plugin = \"wophost-kv\"\n  config {\n    max_rounds = 17\n  }\n}\n")
	_, diags := DecodePluginConfig(c, s, ectx)
	if len(diags) != 1 || diags[0].Detail != "max_rounds must be a whole number from 1 to 16, got 17." {
		t.Fatalf("diagnostics = %v", diags)
	}
	c, ectx, _ = loadCapability(t, "capability \"kv\" {\n  plugin = \"wophost-kv\"\n  config {\n    max_rounds = 16\n    timeout = \"1m\"\n  }\n}\n")
	got, diags := DecodePluginConfig(c, s, ectx)
	if diags.HasErrors() || string(got) != `{"max_rounds":16,"timeout":"1m"}` {
		t.Fatalf("JSON = %s, diagnostics = %v", got, diags)
	}
}
