package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckPluginRefusesWritable(t *testing.T) {
	f := newFixture(t, "capability \"kv\" {\n  plugin = \"wophost-kv\"\n}\ncapability \"ok\" {\n  plugin         = \"wophost-kv\"\n  allow_writable = true\n}\n")
	bin := filepath.Join(f.dir, "bin", "wophost-kv")
	if err := os.Chmod(bin, 0o777); err != nil {
		t.Fatal(err)
	}
	cfg, _ := mustLoad(t, f)
	d := CheckPlugin(cfg.Capabilities[0], cfg.Host.PluginDir)
	if d == nil {
		t.Fatal("a world-writable plugin was accepted")
	}
	if d.Summary != "Plugin is writable by others" || d.Subject == nil || d.Subject.Start.Line != 2 || d.Subject.Start.Column != 12 {
		t.Errorf("diagnostic %q at %+v, want at 2:12", d.Summary, d.Subject)
	}
	for _, w := range []string{bin, "0777", "allow_writable = true", `"kv"`} {
		if !strings.Contains(d.Detail, w) {
			t.Errorf("detail %q does not mention %q", d.Detail, w)
		}
	}
	if !cfg.Capabilities[1].AllowWritable {
		t.Fatal("allow_writable not decoded")
	}
	if d := CheckPlugin(cfg.Capabilities[1], cfg.Host.PluginDir); d != nil {
		t.Errorf("allow_writable = true still refused: %s", d.Detail)
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
	manifest := `{"name":"test.demo","version":"1.0.0","kind":"node","runtime":{"language":"go","entry":"bin/demo"},
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
	check("the entry", entry, 0o757)
	check("the entry's directory", filepath.Dir(entry), 0o777)
	check("pack.json", filepath.Join(pack, "pack.json"), 0o666)
	check("the pack directory", pack, 0o777)
}
