package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// fixture is a directory holding a host.hcl plus the files it refers to.
type fixture struct {
	dir  string
	path string
}

// newFixture creates an executable bin/wophost-kv, a non-executable
// bin/not-exec and a valid pack under packs/demo, then writes src as
// host.hcl.
func newFixture(t *testing.T, src string) fixture {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "bin", "wophost-kv"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(dir, "bin", "not-exec"), "#!/bin/sh\n", 0o644)
	writeFile(t, filepath.Join(dir, "packs", "demo", "pack.json"), "{}\n", 0o644)
	if err := os.MkdirAll(filepath.Join(dir, "packs", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "host.hcl")
	writeFile(t, path, src, 0o644)
	return fixture{dir: dir, path: path}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	// WriteFile honours the umask; tests depend on the exact mode.
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func mustLoad(t *testing.T, f fixture) (*Config, *Loader) {
	t.Helper()
	l := NewLoader()
	cfg, diags := l.Load(f.path)
	if diags.HasErrors() {
		t.Fatalf("unexpected diagnostics:\n%s", renderString(t, l, diags))
	}
	return cfg, l
}

// loadChecked runs l.Load and then the checks the host makes when it
// starts each capability's plugin and loads each pack, appending their
// diagnostics, sorted by position as Load sorts its own.
func loadChecked(l *Loader, path string) (*Config, hcl.Diagnostics) {
	cfg, diags := l.Load(path)
	if cfg == nil {
		return cfg, diags
	}
	for _, c := range cfg.Capabilities {
		if d := CheckPlugin(c, cfg.Host.PluginDir); d != nil {
			diags = append(diags, d)
		}
	}
	for _, p := range cfg.Packs {
		if d := CheckPackDir(p); d != nil {
			diags = append(diags, d)
		}
	}
	sortDiagnostics(diags)
	return cfg, diags
}

func renderString(t *testing.T, l *Loader, diags hcl.Diagnostics) string {
	t.Helper()
	var b strings.Builder
	if err := WriteDiagnostics(&b, l.Files(), diags); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// findDiag returns the first diagnostic whose summary contains summary.
func findDiag(diags hcl.Diagnostics, summary string) *hcl.Diagnostic {
	for _, d := range diags {
		if strings.Contains(d.Summary, summary) {
			return d
		}
	}
	return nil
}

func summaries(diags hcl.Diagnostics) []string {
	out := make([]string, 0, len(diags))
	for _, d := range diags {
		out = append(out, FormatDiagnostic(d))
	}
	return out
}

func TestLoadValid(t *testing.T) {
	const src = `
host {
  plugin_dir        = "./bin"
  state_dir         = "/var/lib/wophost"
  log_level         = "debug"
  log_format        = "json"
  start_timeout     = "20s"
  max_message_bytes = 1048576
  call_depth_limit  = 4
}

capability "kv" {
  plugin        = "wophost-kv"
  sha256        = "ABCDEF0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789"
  families      = ["acme.kv"]
  required      = true
  start_timeout = "10s"
  config {
    path = "data.db"
  }
}

capability "kv2" {
  plugin = "./bin/wophost-kv"
}

pack "community.demo" {
  path = "./packs/demo"
}
`
	f := newFixture(t, src)
	cfg, _ := mustLoad(t, f)

	wantHost := Host{
		PluginDir:       filepath.Join(f.dir, "bin"),
		StateDir:        "/var/lib/wophost",
		LogLevel:        "debug",
		LogFormat:       "json",
		StartTimeout:    20 * time.Second,
		MaxMessageBytes: 1 << 20,
		CallDepthLimit:  4,
		CrashLimit:      DefaultCrashLimit,
		CrashWindow:     DefaultCrashWindow,
		RunTimeout:      DefaultRunTimeout,
		CallTimeout:     DefaultCallTimeout,
		Retention:       DefaultRetention(),
		Storage:         DefaultStorage(),
		Runs:            DefaultRuns(),
		Health:          DefaultHealth(),
		Sandbox:         DefaultSandbox(),
		Wasm:            DefaultWasm(),
		DirectChannels:  true,
		// Twice the max_message_bytes set.
		DirectMaxUnreadBytes: 2 << 20,
	}
	gotHost := cfg.Host
	// Without a sandbox block of its own, the packs' policy points at
	// the host block.
	assertPos(t, "Host.Sandbox.DefRange", gotHost.Sandbox.DefRange, f.path, 2, 1)
	gotHost.Sandbox.DefRange = hcl.Range{}
	if !reflect.DeepEqual(gotHost, wantHost) {
		t.Errorf("Host = %+v, want %+v", gotHost, wantHost)
	}
	if cfg.Path != f.path || cfg.Dir != f.dir {
		t.Errorf("Path, Dir = %q, %q; want %q, %q", cfg.Path, cfg.Dir, f.path, f.dir)
	}
	if len(cfg.Capabilities) != 2 {
		t.Fatalf("got %d capabilities, want 2", len(cfg.Capabilities))
	}

	kv := cfg.Capabilities[0]
	if kv.Name != "kv" || kv.Plugin != "wophost-kv" || kv.PluginPath != filepath.Join(f.dir, "bin", "wophost-kv") {
		t.Errorf("kv name/plugin/path = %q %q %q", kv.Name, kv.Plugin, kv.PluginPath)
	}
	if kv.SHA256 != "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789" {
		t.Errorf("SHA256 not normalised: %q", kv.SHA256)
	}
	if !slices.Equal(kv.Families, []string{"acme.kv"}) || !kv.Required || kv.StartTimeout != 10*time.Second {
		t.Errorf("kv families/required/timeout = %v %v %v", kv.Families, kv.Required, kv.StartTimeout)
	}
	assertPos(t, "kv.DefRange", kv.DefRange, f.path, 12, 1)
	assertPos(t, "kv.PluginRange", kv.PluginRange, f.path, 13, 19)
	assertPos(t, "kv.SHA256Range", kv.SHA256Range, f.path, 14, 19)
	assertPos(t, "kv.ConfigRange", kv.ConfigRange, f.path, 18, 3)
	attrs, diags := kv.Config.JustAttributes()
	if diags.HasErrors() || attrs["path"] == nil {
		t.Errorf("config body lost its attributes: %v %v", attrs, diags)
	}

	kv2 := cfg.Capabilities[1]
	if kv2.PluginPath != filepath.Join(f.dir, "bin", "wophost-kv") {
		t.Errorf("kv2 PluginPath = %q", kv2.PluginPath)
	}
	if kv2.StartTimeout != 20*time.Second {
		t.Errorf("kv2 StartTimeout = %v, want host default 20s", kv2.StartTimeout)
	}
	if kv2.Config == nil {
		t.Fatal("absent config must be an empty body, not nil")
	}
	if attrs, _ := kv2.Config.JustAttributes(); len(attrs) != 0 {
		t.Errorf("absent config has attributes: %v", attrs)
	}
	if kv2.ConfigRange != kv2.DefRange {
		t.Errorf("ConfigRange = %v, want DefRange %v", kv2.ConfigRange, kv2.DefRange)
	}

	if len(cfg.Packs) != 1 || cfg.Packs[0].Name != "community.demo" || cfg.Packs[0].Path != filepath.Join(f.dir, "packs", "demo") {
		t.Errorf("Packs = %+v", cfg.Packs)
	}
	assertPos(t, "pack.PathRange", cfg.Packs[0].PathRange, f.path, 28, 10)

	for _, c := range cfg.Capabilities {
		if d := CheckPlugin(c, cfg.Host.PluginDir); d != nil {
			t.Errorf("CheckPlugin(%s) = %q, want nil", c.Name, FormatDiagnostic(d))
		}
	}
	if d := CheckPackDir(cfg.Packs[0]); d != nil {
		t.Errorf("CheckPackDir = %q, want nil", FormatDiagnostic(d))
	}
}

func TestLoadDefaults(t *testing.T) {
	f := newFixture(t, "")
	cfg, _ := mustLoad(t, f)
	want := Host{
		PluginDir:       filepath.Join(f.dir, "bin"),
		StateDir:        filepath.Join(f.dir, ".wophost"),
		LogLevel:        "info",
		LogFormat:       "text",
		StartTimeout:    15 * time.Second,
		MaxMessageBytes: 16 << 20,
		CallDepthLimit:  8,
		CrashLimit:      5,
		CrashWindow:     10 * time.Minute,
		RunTimeout:      10 * time.Minute,
		CallTimeout:     2 * time.Minute,
		Retention: Retention{
			RunRecords: 168 * time.Hour, MaxRunRecords: 100000,
			IdempotencyKeys: 24 * time.Hour, MaxIdempotencyKeys: 100000, Interval: 10 * time.Minute,
		},
		Storage:              Storage{Backend: "embedded", MaxConnections: 8, StatementTimeout: 5 * time.Second, ClaimLease: 30 * time.Second},
		Runs:                 Runs{LogMaxCalls: 10000, LogMaxBytes: 16 << 20},
		Health:               Health{Interval: 10 * time.Second, Timeout: 5 * time.Second, Failures: 3},
		Sandbox:              Sandbox{Enabled: true, MemoryBytes: 512 << 20, Processes: 64},
		Wasm:                 Wasm{MaxMemoryBytes: 128 << 20, MaxExecution: 30 * time.Second, WarmInstances: 1},
		DirectChannels:       true,
		DirectMaxUnreadBytes: 32 << 20,
	}
	if !reflect.DeepEqual(cfg.Host, want) {
		t.Errorf("Host = %+v, want %+v", cfg.Host, want)
	}
}

func TestLoadDiagnosticPositions(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		summary string
		detail  string // substring of the detail, optional
		line    int
		col     int
		// atStart marks diagnostics that come from CheckPlugin or
		// CheckPackDir, run when the host starts the plugin or pack,
		// rather than from Load.
		atStart bool
	}{
		{
			name: "unknown attribute",
			src: `capability "kv" {
  plugin = "wophost-kv"
  colour = "red"
}
`,
			summary: "Unsupported argument",
			line:    3, col: 3,
		},
		{
			name: "unknown block",
			src: `capabilty "kv" {
}
`,
			summary: "Unsupported block type",
			line:    1, col: 1,
		},
		{
			name: "wrong type",
			src: `capability "kv" {
  plugin   = "wophost-kv"
  required = ["yes"]
}
`,
			summary: "Unsuitable value type",
			line:    3, col: 14,
		},
		{
			name: "missing plugin",
			src: `

capability "kv" {
  required = true
}
`,
			summary: "Missing required argument",
			detail:  `"plugin"`,
			line:    3, col: 1,
		},
		{
			name: "null plugin",
			src: `capability "kv" {
  plugin = null
}
`,
			summary: "Missing required argument",
			line:    1, col: 1,
		},
		{
			name: "empty plugin",
			src: `capability "kv" {
  plugin = ""
}
`,
			summary: "Empty value",
			line:    2, col: 12,
		},
		{
			name: "missing pack path",
			src: `pack "p" {
}
`,
			summary: "Missing required argument",
			detail:  `"path"`,
			line:    1, col: 1,
		},
		{
			name: "missing plugin binary",
			src: `capability "kv" {
  plugin = "nope"
}
`,
			summary: "Plugin not found",
			atStart: true,
			detail:  filepath.Join("bin", "nope"),
			line:    2, col: 12,
		},
		{
			name: "plugin path not executable",
			src: `capability "kv" {
  plugin = "./bin/not-exec"
}
`,
			summary: "Plugin is not executable",
			atStart: true,
			detail:  filepath.Join("bin", "not-exec"),
			line:    2, col: 12,
		},
		{
			name: "bad sha256",
			src: `capability "kv" {
  plugin = "wophost-kv"
  sha256 = "abc"
}
`,
			summary: "Invalid sha256",
			line:    3, col: 12,
		},
		{
			name: "duplicate capability",
			src: `capability "kv" {
  plugin = "wophost-kv"
}
  capability "kv" {
  plugin = "wophost-kv"
}
`,
			summary: "Duplicate capability",
			detail:  "host.hcl:1:1 and again at",
			line:    4, col: 3,
		},
		{
			name: "duplicate pack",
			src: `pack "p" {
  path = "./packs/demo"
}
pack "p" {
  path = "./packs/demo"
}
`,
			summary: "Duplicate pack",
			line:    4, col: 1,
		},
		{
			name: "pack dir missing",
			src: `pack "p" {
  path = "./packs/nope"
}
`,
			summary: "Pack directory not found",
			atStart: true,
			detail:  filepath.Join("packs", "nope"),
			line:    2, col: 10,
		},
		{
			name: "pack without manifest",
			src: `pack "p" {
  path = "./packs/empty"
}
`,
			summary: "Pack manifest not found",
			atStart: true,
			line:    2, col: 10,
		},
		{
			name: "bad duration",
			src: `host {
  start_timeout = "soon"
}
`,
			summary: "Invalid duration",
			line:    2, col: 19,
		},
		{
			name: "zero duration",
			src: `capability "kv" {
  plugin        = "wophost-kv"
  start_timeout = "0s"
}
`,
			summary: "Invalid duration",
			line:    3, col: 19,
		},
		{
			name: "bad log level",
			src: `host {
  log_level = "loud"
}
`,
			summary: "Invalid log_level",
			line:    2, col: 15,
		},
		{
			name: "bad log format",
			src: `host {
  log_format = "xml"
}
`,
			summary: "Invalid log_format",
			line:    2, col: 16,
		},
		{
			name: "message size out of range",
			src: `host {
  max_message_bytes = 10
}
`,
			summary: "Invalid max_message_bytes",
			line:    2, col: 23,
		},
		{
			name: "call depth out of range",
			src: `host {
  call_depth_limit = 65
}
`,
			summary: "Invalid call_depth_limit",
			line:    2, col: 22,
		},
		{
			name: "duplicate host",
			src: `host {}
host {}
`,
			summary: "Duplicate host block",
			line:    2, col: 1,
		},
		{
			name: "syntax error",
			src: `host {
  log_level = 
}
`,
			summary: "Invalid expression",
			line:    2, col: 15,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.src)
			var diags hcl.Diagnostics
			if tt.atStart {
				_, diags = loadChecked(NewLoader(), f.path)
			} else {
				_, diags = NewLoader().Load(f.path)
			}
			d := findDiag(diags, tt.summary)
			if d == nil {
				t.Fatalf("no %q diagnostic in %q", tt.summary, summaries(diags))
			}
			if d.Severity != hcl.DiagError {
				t.Errorf("severity = %v, want error", d.Severity)
			}
			if d.Subject == nil {
				t.Fatalf("%q has no subject", d.Summary)
			}
			assertPos(t, tt.summary, *d.Subject, f.path, tt.line, tt.col)
			if tt.detail != "" && !strings.Contains(d.Detail, tt.detail) {
				t.Errorf("detail %q does not contain %q", d.Detail, tt.detail)
			}
		})
	}
}

// collectSrc has one problem of each kind: some found by Load, a missing
// plugin and a missing pack dir found only when the host starts them.
const collectSrc = `host {
  log_level = "loud"
  colour    = "red"
}

capability "kv" {
  plugin = "nope"
  sha256 = "xyz"
}

capability "kv" {
  plugin = "wophost-kv"
}

pack "p" {
  path = "./missing"
}
`

func TestLoadCollectsAllProblems(t *testing.T) {
	f := newFixture(t, collectSrc)
	cfg, diags := loadChecked(NewLoader(), f.path)
	if cfg == nil {
		t.Fatal("a config that parses must come back even with errors")
	}
	want := []struct {
		summary   string
		line, col int
	}{
		{"Invalid log_level", 2, 15},
		{"Unsupported argument", 3, 3},
		{"Plugin not found", 7, 12},
		{"Invalid sha256", 8, 12},
		{"Duplicate capability", 11, 1},
		{"Pack directory not found", 16, 10},
	}
	if len(diags) != len(want) {
		t.Errorf("got %d diagnostics, want %d: %q", len(diags), len(want), summaries(diags))
	}
	for _, w := range want {
		d := findDiag(diags, w.summary)
		if d == nil {
			t.Errorf("missing %q in %q", w.summary, summaries(diags))
			continue
		}
		assertPos(t, w.summary, *d.Subject, f.path, w.line, w.col)
	}
	// Sorted by position so the output follows the file.
	for i := 1; i < len(diags); i++ {
		if diags[i-1].Subject.Start.Byte > diags[i].Subject.Start.Byte {
			t.Errorf("diagnostics out of order: %q", summaries(diags))
			break
		}
	}
}

// TestLoadLeavesPluginAndPackChecks checks that Load alone does not
// report a missing plugin or pack dir: those are the host's to check when
// it starts each one, so one missing plugin withdraws only its families.
func TestLoadLeavesPluginAndPackChecks(t *testing.T) {
	f := newFixture(t, collectSrc)
	cfg, diags := NewLoader().Load(f.path)
	if cfg == nil {
		t.Fatal("a config that parses must come back even with errors")
	}
	want := []string{"Invalid log_level", "Unsupported argument", "Invalid sha256", "Duplicate capability"}
	if len(diags) != len(want) {
		t.Errorf("got %d diagnostics, want %d: %q", len(diags), len(want), summaries(diags))
	}
	for _, w := range want {
		if findDiag(diags, w) == nil {
			t.Errorf("missing %q in %q", w, summaries(diags))
		}
	}
	for i := 1; i < len(diags); i++ {
		if diags[i-1].Subject.Start.Byte > diags[i].Subject.Start.Byte {
			t.Errorf("diagnostics out of order: %q", summaries(diags))
			break
		}
	}

	// Nothing but missing files, so Load itself is clean.
	f = newFixture(t, `capability "kv" {
  plugin = "nope"
}

capability "ne" {
  plugin = "./bin/not-exec"
}

pack "p" {
  path = "./packs/nope"
}

pack "e" {
  path = "./packs/empty"
}
`)
	cfg, diags = NewLoader().Load(f.path)
	if len(diags) != 0 {
		t.Fatalf("Load reported %q, want nothing", summaries(diags))
	}
	if len(cfg.Capabilities) != 2 || len(cfg.Packs) != 2 {
		t.Fatalf("got %d capabilities and %d packs, want 2 and 2", len(cfg.Capabilities), len(cfg.Packs))
	}
	for _, s := range []string{"Plugin not found", "Plugin is not executable", "Pack directory not found", "Pack manifest not found"} {
		if findDiag(diags, s) != nil {
			t.Errorf("Load reported %q", s)
		}
	}
	// The checks still find them, at the attribute concerned.
	_, checked := loadChecked(NewLoader(), f.path)
	for _, w := range []struct {
		summary   string
		line, col int
	}{
		{"Plugin not found", 2, 12},
		{"Plugin is not executable", 6, 12},
		{"Pack directory not found", 10, 10},
		{"Pack manifest not found", 14, 10},
	} {
		d := findDiag(checked, w.summary)
		if d == nil {
			t.Errorf("missing %q in %q", w.summary, summaries(checked))
			continue
		}
		assertPos(t, w.summary, *d.Subject, f.path, w.line, w.col)
	}
}

func TestLoadReloads(t *testing.T) {
	f := newFixture(t, "host {\n  log_level = \n}\n")
	l := NewLoader()
	for i := range 2 {
		// A cached parse would drop the syntax error the second time.
		if _, diags := l.Load(f.path); !diags.HasErrors() {
			t.Fatalf("load %d: syntax error not reported", i)
		}
	}
	writeFile(t, f.path, "host {\n  log_level = \"debug\"\n}\n", 0o644)
	cfg, diags := l.Load(f.path)
	if diags.HasErrors() || cfg.Host.LogLevel != "debug" {
		t.Fatalf("reload: level %q, diags %q", cfg.Host.LogLevel, summaries(diags))
	}
	if !strings.Contains(string(l.Files()[f.path].Bytes), "debug") {
		t.Error("Files() still holds the old source")
	}
}

func TestLoadJSON(t *testing.T) {
	f := newFixture(t, "")
	path := filepath.Join(f.dir, "host.hcl.json")
	writeFile(t, path, `{"capability": {"kv": {"plugin": "wophost-kv", "config": {"a": 1}}}}`, 0o644)
	cfg, diags := NewLoader().Load(path)
	if diags.HasErrors() {
		t.Fatalf("unexpected diagnostics: %q", summaries(diags))
	}
	if len(cfg.Capabilities) != 1 || cfg.Capabilities[0].PluginPath != filepath.Join(f.dir, "bin", "wophost-kv") {
		t.Fatalf("capabilities = %+v", cfg.Capabilities)
	}
}

func TestLoadMissingFile(t *testing.T) {
	cfg, diags := NewLoader().Load(filepath.Join(t.TempDir(), "nope.hcl"))
	if cfg != nil || !diags.HasErrors() {
		t.Fatalf("cfg = %v, diags = %v; want nil and an error", cfg, diags)
	}
	if !strings.Contains(diags[0].Detail, "nope.hcl") {
		t.Errorf("detail %q does not name the file", diags[0].Detail)
	}
}

func TestFunctions(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		files map[string]string
		// links are symbolic links to make in the fixture, by name; in a
		// target, OUTSIDE is a directory beside the fixture holding
		// secret.txt.
		links    map[string]string
		fifos    []string
		src      string
		wantDir  string // expected PluginDir relative to the fixture
		wantDiag string // substring of the error detail, "" for none
		line     int
		col      int
	}{
		{
			name:    "env set",
			env:     map[string]string{"WOPHOST_TEST_DIR": "plugins"},
			src:     `host { plugin_dir = env("WOPHOST_TEST_DIR") }`,
			wantDir: "plugins",
		},
		{
			name:    "env set but empty wins over default",
			env:     map[string]string{"WOPHOST_TEST_DIR": "x"},
			src:     `host { plugin_dir = env("WOPHOST_TEST_DIR", "fallback") }`,
			wantDir: "x",
		},
		{
			name:    "env default",
			src:     `host { plugin_dir = env("WOPHOST_TEST_UNSET", "fallback") }`,
			wantDir: "fallback",
		},
		{
			name:     "env unset",
			src:      "host {\n  plugin_dir = env(\"WOPHOST_TEST_UNSET\")\n}\n",
			wantDiag: `"WOPHOST_TEST_UNSET"`,
			// HCL points inside the quotes, at the string's content.
			line: 2, col: 21,
		},
		{
			name:    "file ok",
			files:   map[string]string{"dir.txt": "from-file"},
			src:     `host { plugin_dir = file("dir.txt") }`,
			wantDir: "from-file",
		},
		{
			name:     "file missing",
			src:      "host {\n  plugin_dir = file(\"missing.txt\")\n}\n",
			wantDiag: `"missing.txt"`,
			line:     2, col: 22,
		},
		{
			name:    "file inside through dot-dot",
			files:   map[string]string{"sub/x.txt": "", "dir.txt": "inside"},
			src:     `host { plugin_dir = file("sub/../dir.txt") }`,
			wantDir: "inside",
		},
		{
			name:     "file escapes the config dir",
			src:      "host {\n  plugin_dir = file(\"../secret.txt\")\n}\n",
			wantDiag: `"../secret.txt" leaves the config file's directory`,
			line:     2, col: 22,
		},
		{
			name:     "file escapes midway",
			src:      "host {\n  plugin_dir = file(\"sub/../../secret.txt\")\n}\n",
			wantDiag: "leaves the config file's directory",
			line:     2, col: 22,
		},
		{
			name:    "file through a link that stays inside",
			files:   map[string]string{"real/dir.txt": "linked"},
			links:   map[string]string{"dir.txt": "real/dir.txt", "alias": "real"},
			src:     `host { plugin_dir = file("dir.txt") }`,
			wantDir: "linked",
		},
		{
			name:    "file through a linked directory inside",
			files:   map[string]string{"real/dir.txt": "linked"},
			links:   map[string]string{"alias": "real"},
			src:     `host { plugin_dir = file("alias/dir.txt") }`,
			wantDir: "linked",
		},
		{
			name:     "file links outside the config dir",
			links:    map[string]string{"x": "OUTSIDE/secret.txt"},
			src:      "host {\n  plugin_dir = file(\"./x\")\n}\n",
			wantDiag: "leads outside the config file's directory",
			line:     2, col: 22,
		},
		{
			name:     "file links outside relatively",
			links:    map[string]string{"x": "../outside/secret.txt"},
			src:      "host {\n  plugin_dir = file(\"x\")\n}\n",
			wantDiag: "leads outside the config file's directory",
			line:     2, col: 22,
		},
		{
			name:     "file through a linked directory outside",
			links:    map[string]string{"d": "OUTSIDE"},
			src:      "host {\n  plugin_dir = file(\"d/secret.txt\")\n}\n",
			wantDiag: "leads outside the config file's directory",
			line:     2, col: 22,
		},
		{
			name:     "file is a FIFO",
			fifos:    []string{"fifo"},
			src:      "host {\n  plugin_dir = file(\"fifo\")\n}\n",
			wantDiag: "not a regular file",
			line:     2, col: 22,
		},
		{
			name:     "file is a device",
			src:      "host {\n  plugin_dir = file(\"/dev/zero\")\n}\n",
			wantDiag: "not a regular file",
			line:     2, col: 22,
		},
		{
			name:     "file too large",
			files:    map[string]string{"big.txt": strings.Repeat("x", MaxFileBytes+1)},
			src:      "host {\n  plugin_dir = file(\"big.txt\")\n}\n",
			wantDiag: "larger than",
			line:     2, col: 22,
		},
		{
			name:     "no variables",
			src:      "host {\n  plugin_dir = var.dir\n}\n",
			wantDiag: "Variables may not be used here",
			line:     2, col: 16,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			f := newFixture(t, tt.src)
			for name, content := range tt.files {
				writeFile(t, filepath.Join(f.dir, name), content, 0o644)
			}
			outside := filepath.Join(filepath.Dir(f.dir), "outside")
			writeFile(t, filepath.Join(outside, "secret.txt"), "outside-secret", 0o644)
			for name, target := range tt.links {
				if err := os.Symlink(strings.ReplaceAll(target, "OUTSIDE", outside), filepath.Join(f.dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range tt.fifos {
				if err := syscall.Mkfifo(filepath.Join(f.dir, name), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg, diags := NewLoader().Load(f.path)
			if tt.wantDiag == "" {
				if diags.HasErrors() {
					t.Fatalf("unexpected diagnostics: %q", summaries(diags))
				}
				if want := filepath.Join(f.dir, tt.wantDir); cfg.Host.PluginDir != want {
					t.Errorf("PluginDir = %q, want %q", cfg.Host.PluginDir, want)
				}
				return
			}
			if len(diags) != 1 {
				t.Fatalf("want exactly one diagnostic, got %q", summaries(diags))
			}
			if !strings.Contains(diags[0].Detail, tt.wantDiag) {
				t.Errorf("detail %q does not contain %q", diags[0].Detail, tt.wantDiag)
			}
			if strings.Contains(diags[0].Detail, "outside-secret") {
				t.Errorf("detail %q holds the contents of a file outside", diags[0].Detail)
			}
			assertPos(t, "function error", *diags[0].Subject, f.path, tt.line, tt.col)
		})
	}
}

func assertPos(t *testing.T, what string, r hcl.Range, file string, line, col int) {
	t.Helper()
	if r.Filename != file || r.Start.Line != line || r.Start.Column != col {
		t.Errorf("%s at %s:%d:%d, want %s:%d:%d", what, r.Filename, r.Start.Line, r.Start.Column, file, line, col)
	}
}

func TestCrashLimitSettings(t *testing.T) {
	cfg, _ := mustLoad(t, newFixture(t, "host {\n  crash_limit  = 3\n  crash_window = \"1m\"\n}\n"))
	if cfg.Host.CrashLimit != 3 || cfg.Host.CrashWindow != time.Minute {
		t.Fatalf("crash_limit %d, crash_window %s", cfg.Host.CrashLimit, cfg.Host.CrashWindow)
	}
	f := newFixture(t, "host {\n  crash_limit  = 0\n  crash_window = \"-1m\"\n}\n")
	_, diags := NewLoader().Load(f.path)
	if d := findDiag(diags, "Invalid crash_limit"); d == nil {
		t.Errorf("crash_limit = 0 accepted: %v", summaries(diags))
	} else {
		assertPos(t, "crash_limit", *d.Subject, f.path, 2, 18)
	}
	if d := findDiag(diags, "Invalid duration"); d == nil {
		t.Errorf("crash_window = -1m accepted: %v", summaries(diags))
	} else {
		assertPos(t, "crash_window", *d.Subject, f.path, 3, 18)
	}
}

func TestBoundsSettings(t *testing.T) {
	f := newFixture(t, "host {\n  run_timeout = \"90s\"\n  call_timeout = \"20s\"\n}\ncapability \"kv\" {\n  plugin               = \"wophost-kv\"\n  max_concurrent_calls = 3\n}\n")
	cfg, _ := mustLoad(t, f)
	if cfg.Host.RunTimeout != 90*time.Second || cfg.Host.CallTimeout != 20*time.Second || cfg.Capabilities[0].MaxConcurrentCalls != 3 {
		t.Fatalf("run_timeout %s, call_timeout %s, max_concurrent_calls %d", cfg.Host.RunTimeout, cfg.Host.CallTimeout, cfg.Capabilities[0].MaxConcurrentCalls)
	}
	cfg, _ = mustLoad(t, newFixture(t, "capability \"kv\" {\n  plugin = \"wophost-kv\"\n}\n"))
	if cfg.Host.RunTimeout != DefaultRunTimeout || cfg.Host.CallTimeout != DefaultCallTimeout || cfg.Capabilities[0].MaxConcurrentCalls != DefaultMaxConcurrent {
		t.Fatalf("defaults: run_timeout %s, call_timeout %s, max_concurrent_calls %d", cfg.Host.RunTimeout, cfg.Host.CallTimeout, cfg.Capabilities[0].MaxConcurrentCalls)
	}
	_, diags := NewLoader().Load(newFixture(t, "host {\n  call_timeout = \"0s\"\n}\n").path)
	if d := findDiag(diags, "Invalid duration"); d == nil || !strings.Contains(d.Detail, "call_timeout") {
		t.Errorf("call_timeout = 0s accepted: %v", summaries(diags))
	}
	f = newFixture(t, "capability \"kv\" {\n  plugin               = \"wophost-kv\"\n  max_concurrent_calls = 0\n}\n")
	_, diags = NewLoader().Load(f.path)
	if d := findDiag(diags, "Invalid max_concurrent_calls"); d == nil {
		t.Errorf("max_concurrent_calls = 0 accepted: %v", summaries(diags))
	} else {
		assertPos(t, "max_concurrent_calls", *d.Subject, f.path, 3, 26)
	}
}

func TestProcessGoMaxProcs(t *testing.T) {
	cfg, _ := mustLoad(t, newFixture(t, "host {\n  process_gomaxprocs = 3\n}\n"))
	if cfg.Host.ProcessGoMaxProcs != 3 {
		t.Fatalf("process_gomaxprocs = %d, want 3", cfg.Host.ProcessGoMaxProcs)
	}
	cfg, _ = mustLoad(t, newFixture(t, "host {}\n"))
	if cfg.Host.ProcessGoMaxProcs != 0 {
		t.Fatalf("default process_gomaxprocs = %d, want 0 (the host chooses)", cfg.Host.ProcessGoMaxProcs)
	}
	cfg, _ = mustLoad(t, newFixture(t, fmt.Sprintf("host {\n  process_gomaxprocs = %d\n}\n", MaxGoMaxProcs)))
	if cfg.Host.ProcessGoMaxProcs != MaxGoMaxProcs {
		t.Fatalf("process_gomaxprocs = %d, want the bound %d", cfg.Host.ProcessGoMaxProcs, MaxGoMaxProcs)
	}
	for _, v := range []string{"-1", strconv.Itoa(MaxGoMaxProcs + 1), "1.5"} {
		f := newFixture(t, "host {\n  process_gomaxprocs = "+v+"\n}\n")
		_, diags := NewLoader().Load(f.path)
		var d *hcl.Diagnostic
		for _, e := range diags.Errs() {
			if de, ok := e.(*hcl.Diagnostic); ok && strings.Contains(FormatDiagnostic(de), "process_gomaxprocs") {
				d = de
			}
		}
		if d == nil {
			t.Errorf("process_gomaxprocs = %s accepted: %v", v, summaries(diags))
		} else {
			assertPos(t, "process_gomaxprocs", *d.Subject, f.path, 2, 24)
		}
	}
}

func TestGoMaxProcs(t *testing.T) {
	cfg, _ := mustLoad(t, newFixture(t, "host {\n  gomaxprocs = 1\n}\n"))
	if cfg.Host.GoMaxProcs != 1 {
		t.Fatalf("gomaxprocs = %d, want 1", cfg.Host.GoMaxProcs)
	}
	cfg, _ = mustLoad(t, newFixture(t, "host {}\n"))
	if cfg.Host.GoMaxProcs != 0 {
		t.Fatalf("default gomaxprocs = %d, want 0 (Go's default)", cfg.Host.GoMaxProcs)
	}
	f := newFixture(t, "host {\n  gomaxprocs = -1\n}\n")
	_, diags := NewLoader().Load(f.path)
	if d := findDiag(diags, "Invalid gomaxprocs"); d == nil {
		t.Errorf("gomaxprocs = -1 accepted: %v", summaries(diags))
	} else {
		assertPos(t, "gomaxprocs", *d.Subject, f.path, 2, 16)
	}
}
