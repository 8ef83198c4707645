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

// keys generate makes a missing --dir, and its parents, for its owner
// alone; a --dir that is a file is a failure naming the flag, with
// nothing written.
func TestKeysGenerateMakesItsDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "keys", "acme")
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"keys", "generate", "acme-1", "--dir", dir}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, d := range []string{filepath.Join(base, "keys"), dir} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o700 {
			t.Errorf("%s: mode %o, want 700", d, perm)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "acme-1.key.json"))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("the private key: mode %o, want 600", perm)
	}
	if _, err := os.Stat(filepath.Join(dir, "acme-1.pub.json")); err != nil {
		t.Error(err)
	}

	// An existing directory keeps its mode.
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if code := execute([]string{"keys", "generate", "acme-2", "--dir", open}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if fi, err := os.Stat(open); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("an existing --dir: %v, %v; want its mode 755 kept", fi.Mode(), err)
	}

	// A --dir that is a file, or under one.
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{file, filepath.Join(file, "keys")} {
		stdout.Reset()
		stderr.Reset()
		code := execute([]string{"keys", "generate", "acme-3", "--dir", bad}, strings.NewReader(""), &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "--dir "+bad) {
			t.Errorf("--dir %s: exit %d, stderr %q; want 1 and the flag named", bad, code, stderr.String())
		}
		if stdout.Len() != 0 {
			t.Errorf("--dir %s: printed %q", bad, stdout.String())
		}
	}
}
