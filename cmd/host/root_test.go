package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --log-level takes the place of the config's log_level in the config the
// host starts from (and reloads), so that the plugins and packs it starts
// get it too; without the flag the config's level stands.
func TestReadConfigLogLevelFlag(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "host.hcl")
	if err := os.WriteFile(path, []byte("host {\n  state_dir = \""+dir+"/state\"\n  log_level = \"warn\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"": "warn", "debug": "debug", "off": "off"} {
		g := &globals{configPath: path, logLevel: flag}
		cfg, _, diags := g.readConfig()
		if diags.HasErrors() || cfg == nil {
			t.Fatalf("--log-level %q: %v", flag, diags)
		}
		if cfg.Host.LogLevel != want {
			t.Errorf("--log-level %q: the config's level is %q, want %q", flag, cfg.Host.LogLevel, want)
		}
	}
}

// A --log-level that is no level is a usage error naming the flag, before
// any config is read; the near misses (another case, a level of another
// logger) are refused as well.
func TestLogLevelFlagRefused(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.hcl")
	for _, level := range []string{"verbose", "DEBUG", "warning", " info"} {
		var stdout, stderr bytes.Buffer
		code := execute([]string{"--config", missing, "--log-level", level, "capabilities"}, strings.NewReader(""), &stdout, &stderr)
		if code != 2 {
			t.Errorf("--log-level %q: exit %d, want 2; stderr: %s", level, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "--log-level") || !strings.Contains(stderr.String(), "trace, debug, info, warn, error, off") {
			t.Errorf("--log-level %q: stderr does not name the flag and its values: %s", level, stderr.String())
		}
		if stdout.Len() != 0 {
			t.Errorf("--log-level %q: printed %q", level, stdout.String())
		}
	}
	// Each level is taken: the command gets as far as reading the config.
	for _, level := range []string{"trace", "debug", "info", "warn", "error", "off"} {
		var stdout, stderr bytes.Buffer
		code := execute([]string{"--config", missing, "--log-level", level, "capabilities"}, strings.NewReader(""), &stdout, &stderr)
		if code != 1 || strings.Contains(stderr.String(), "--log-level") {
			t.Errorf("--log-level %q: exit %d, stderr %s; want the config's error, exit 1", level, code, stderr.String())
		}
	}
}
