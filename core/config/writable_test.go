package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// allow_writable is decoded for the loader, which checks permissions on
// the binary once opened: CheckPlugin words only what the operator typed
// wrong (a missing, non-executable or directory path).
func TestAllowWritableDecoded(t *testing.T) {
	f := newFixture(t, "capability \"kv\" {\n  plugin = \"wophost-kv\"\n}\ncapability \"ok\" {\n  plugin         = \"wophost-kv\"\n  allow_writable = true\n}\n")
	cfg, _ := mustLoad(t, f)
	if cfg.Capabilities[0].AllowWritable || !cfg.Capabilities[1].AllowWritable {
		t.Fatalf("allow_writable decoded as %v and %v, want false and true", cfg.Capabilities[0].AllowWritable, cfg.Capabilities[1].AllowWritable)
	}
}

func TestAllowWritableMustBeBool(t *testing.T) {
	f := newFixture(t, "capability \"kv\" {\n  plugin         = \"wophost-kv\"\n  allow_writable = \"yes please\"\n}\n")
	_, diags := NewLoader().Load(f.path)
	if !diags.HasErrors() {
		t.Fatal("a string allow_writable was accepted")
	}
	if s := diags[0].Subject; s == nil || s.Start.Line != 3 {
		t.Errorf("diagnostic %q at %+v, want line 3", diags[0].Summary, s)
	}
}

func TestCheckPackDirRefusesWritable(t *testing.T) {
	f := newFixture(t, "pack \"demo\" { path = \"packs/demo\" }\npack \"ok\" {\n  path           = \"packs/demo\"\n  allow_writable = true\n}\n")
	pack := filepath.Join(f.dir, "packs", "demo")
	manifest := `{"name":"private.test.demo","version":"1.0.0","kind":"node","engines":{"openwop":">=2.0 <3.0.0"},"runtime":{"language":"go","entry":"bin/demo"},
"nodes":[{"typeId":"demo.x","version":"1.0.0","category":"data","role":"pure"}]}`
	writeFile(t, filepath.Join(pack, "pack.json"), manifest, 0o644)
	entry := filepath.Join(pack, "bin", "demo")
	writeFile(t, entry, "#!/bin/sh\n", 0o755)
	cfg, _ := mustLoad(t, f)
	if d := CheckPackDir(cfg.Packs[0]); d != nil {
		t.Fatalf("a private pack was refused: %s", d.Detail)
	}

	check := func(what, path string, mode os.FileMode) {
		t.Helper()
		old, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(path, old.Mode().Perm())
		d := CheckPackDir(cfg.Packs[0])
		if d == nil {
			t.Fatalf("%s writable by others was accepted", what)
		}
		if d.Subject == nil || d.Subject.Start.Line != 1 || !strings.Contains(d.Detail, path) || !strings.Contains(d.Detail, "allow_writable") {
			t.Errorf("%s: diagnostic %q %q at %+v", what, d.Summary, d.Detail, d.Subject)
		}
		if d := CheckPackDir(cfg.Packs[1]); d != nil {
			t.Errorf("%s: allow_writable = true still refused: %s", what, d.Detail)
		}
	}
	// The entry and its directory are checked on the opened binary
	// (loader.OpenPackEntry), not here.
	check("pack.json", filepath.Join(pack, "pack.json"), 0o666)
	check("the pack directory", pack, 0o777)
}
