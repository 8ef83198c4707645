package scaffold

import (
	"bytes"
	"errors"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/packmanifest"
)

// sdkDir is the checkout's SDK, which the tests write modules against.
func sdkDir(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", "sdk"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// A plugin is written as the listed files; its go.mod requires the SDK at
// the placeholder and replaces it with the SDK directory, at the SDK's Go
// version; its Go files are gofmt'ed Go; its host.hcl loads and runs the
// plugin under its name with a greeting.
func TestWritePlugin(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "greet")
	res, err := WritePlugin(dir, Plugin{Name: "greet", Family: "acme.greet", Method: "sayHello", SDKDir: sdkDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".gitignore", "README.md", "conformance.hcl", "conformance_test.go", "go.mod", "host.hcl", "main.go"}
	if !slices.Equal(res.Files, want) {
		t.Errorf("files %q; want %q", res.Files, want)
	}
	if res.Module != "example.com/greet" || res.Executable != "greet" || res.Target != "acme.greet.sayHello" || res.Dir != dir {
		t.Errorf("result %+v", res)
	}
	checkGoMod(t, dir, "example.com/greet")
	checkGoFiles(t, dir, res.Files)
	main := read(t, dir, "main.go")
	for _, s := range []string{`family          = "acme.greet"`, `"acme.name_too_long"`, `methodSayHello  = "sayHello"`, `Name:    "greet"`} {
		if !strings.Contains(main, s) {
			t.Errorf("main.go lacks %s", s)
		}
	}
	if pureField.MatchString(main) {
		t.Error("main.go declares a pure method, though Pure is not set")
	}

	// The host config loads once the plugin is built: stand a file in
	// for it.
	if err := os.WriteFile(filepath.Join(dir, "greet"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.NewLoader().Load(filepath.Join(dir, "host.hcl"))
	if diags.HasErrors() {
		t.Fatalf("host.hcl: %s", config.FormatDiagnostics(diags))
	}
	if len(cfg.Capabilities) != 1 {
		t.Fatalf("host.hcl declares %d capabilities; want 1", len(cfg.Capabilities))
	}
	if c := cfg.Capabilities[0]; c.Name != "greet" || c.PluginPath != filepath.Join(dir, "greet") {
		t.Errorf("host.hcl declares %+v; want the capability greet running ./greet", *c)
	}
}

// Pure declares the one method pure, and only it; the module still
// builds as gofmt'ed Go.
func TestWritePluginPure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lookup")
	res, err := WritePlugin(dir, Plugin{Name: "lookup", Family: "acme.lookup", Method: "find", Pure: true, SDKDir: sdkDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	checkGoFiles(t, dir, res.Files)
	main := read(t, dir, "main.go")
	if got := pureField.FindAllString(main, -1); len(got) != 1 || !regexp.MustCompile(`Pure:\s+\[\]string\{methodFind\},`).MatchString(main) {
		t.Errorf("main.go declares %q, want Pure once as []string{methodFind}:\n%s", got, main)
	}
}

// pureField matches a Family's Pure field in a generated main.go.
var pureField = regexp.MustCompile(`(?m)^\s*Pure:\s`)

// packFiles are the files a pack is written as, whatever its runtime.
var packFiles = []string{".gitignore", "README.md", "go.mod", "host.hcl", "main.go", "pack.json", "pack_test.go",
	"schemas/count.input.json", "schemas/count.output.json"}

// A pack is written as the listed files; its pack.json loads as the host
// loads it, schemas included, with the entry and node the result names.
func TestWritePack(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "notes")
	res, err := WritePack(dir, Pack{Name: "community.acme.myNotes", SDKDir: sdkDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Files, packFiles) {
		t.Errorf("files %q; want %q", res.Files, packFiles)
	}
	// The node's default typeId lowercases the name's last segment, which
	// a typeId's first segment must be.
	if res.Module != "example.com/myNotes" || res.Executable != "myNotes" || res.Target != "mynotes.count" {
		t.Errorf("result %+v", res)
	}
	checkGoMod(t, dir, "example.com/myNotes")
	checkGoFiles(t, dir, res.Files)
	m, _, err := packmanifest.Load(dir)
	if err != nil {
		t.Fatalf("pack.json does not load: %v", err)
	}
	if m.Name != "community.acme.myNotes" || m.Runtime.Entry != "myNotes" || len(m.Nodes) != 1 || m.Nodes[0].TypeID != "mynotes.count" || len(m.Notes) != 0 {
		t.Errorf("pack.json: %+v", m)
	}
	cfg, diags := config.NewLoader().Load(filepath.Join(dir, "host.hcl"))
	if diags.HasErrors() {
		t.Fatalf("host.hcl: %s", config.FormatDiagnostics(diags))
	}
	if len(cfg.Packs) != 1 {
		t.Fatalf("host.hcl declares %d packs; want 1", len(cfg.Packs))
	}
	if p := cfg.Packs[0]; p.Name != "community.acme.myNotes" || p.Path != dir {
		t.Errorf("host.hcl declares %+v; want the pack in its own directory", *p)
	}
}

// A WebAssembly pack has the process pack's files, its own main.go,
// pack.json, test, README and .gitignore: the module serves through
// wasmpack, names bin/NAME.wasm as its entry, and ignores bin/.
func TestWritePackWasm(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "notes")
	res, err := WritePack(dir, Pack{Name: "community.acme.notes", Runtime: RuntimeWasm, SDKDir: sdkDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Files, packFiles) {
		t.Errorf("files %q; want %q", res.Files, packFiles)
	}
	build := "GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o bin/notes.wasm ."
	if res.Executable != "bin/notes.wasm" || res.Build != build || res.Target != "notes.count" {
		t.Errorf("result %+v", res)
	}
	checkGoMod(t, dir, "example.com/notes")
	checkGoFiles(t, dir, res.Files)
	for file, wants := range map[string][]string{
		"main.go":    {`"github.com/wophost/wophost/sdk/wasmpack"`, "func init() {", "//\t" + build},
		"pack.json":  {`"runtime": {"language": "wasm", "entry": "bin/notes.wasm", "format": "wasm"}`},
		".gitignore": {"/bin/\n"},
		"host.hcl":   {"Build the pack first: " + build},
		"README.md":  {build},
	} {
		got := read(t, dir, file)
		for _, w := range wants {
			if !strings.Contains(got, w) {
				t.Errorf("%s lacks %q:\n%s", file, w, got)
			}
		}
	}
	if got := read(t, dir, "main.go"); strings.Contains(got, "sdk/pack\"") {
		t.Errorf("main.go imports sdk/pack")
	}
}

// A module written for a version of the SDK requires that version with
// no replace directive, at the SDK's Go version, and its README says where
// the SDK comes from; a plugin's and a pack's alike.
func TestWriteForSDKVersion(t *testing.T) {
	for _, kind := range []string{"plugin", "pack"} {
		t.Run(kind, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			var res *Result
			var err error
			if kind == "plugin" {
				res, err = WritePlugin(dir, Plugin{Name: "greet", SDKVersion: "v0.2.0"})
			} else {
				res, err = WritePack(dir, Pack{Name: "community.acme.notes", SDKVersion: "v0.2.0"})
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.SDKVersion != "v0.2.0" || res.SDKDir != "" {
				t.Errorf("result: SDK %q from %q; want v0.2.0 and no directory", res.SDKVersion, res.SDKDir)
			}
			f, err := modfile.Parse("go.mod", []byte(read(t, dir, "go.mod")), nil)
			if err != nil {
				t.Fatal(err)
			}
			if f.Go.Version != SDKGoVersion || len(f.Require) != 1 || f.Require[0].Mod.Path != SDKModule || f.Require[0].Mod.Version != "v0.2.0" || len(f.Replace) != 0 {
				t.Errorf("go.mod: go %s, requires %+v, replaces %+v; want go %s, %s v0.2.0 and no replace", f.Go.Version, f.Require, f.Replace, SDKGoVersion, SDKModule)
			}
			readme := read(t, dir, "README.md")
			if !strings.Contains(readme, "`github.com/wophost/wophost/sdk` at v0.2.0") || strings.Contains(readme, "replace") {
				t.Errorf("README.md does not say the SDK is v0.2.0:\n%s", readme)
			}
			checkGoFiles(t, dir, res.Files)
		})
	}
}

// SDKGoVersion, which a go.mod written for a version of the SDK states,
// is the go directive of the SDK's go.mod.
func TestSDKGoVersion(t *testing.T) {
	v, err := CheckSDK(sdkDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if v != SDKGoVersion {
		t.Errorf("sdk/go.mod states go %s; SDKGoVersion is %s", v, SDKGoVersion)
	}
}

// checkGoMod checks go.mod's module, its require and replace of the SDK,
// and that its Go version is the SDK's.
func checkGoMod(t *testing.T, dir, module string) {
	t.Helper()
	f, err := modfile.Parse("go.mod", []byte(read(t, dir, "go.mod")), nil)
	if err != nil {
		t.Fatal(err)
	}
	goVersion, err := CheckSDK(sdkDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if f.Module.Mod.Path != module || f.Go.Version != goVersion {
		t.Errorf("go.mod: module %s, go %s; want %s, go %s", f.Module.Mod.Path, f.Go.Version, module, goVersion)
	}
	if len(f.Require) != 1 || f.Require[0].Mod.Path != SDKModule || f.Require[0].Mod.Version != SDKVersion {
		t.Errorf("go.mod requires %+v; want only %s %s", f.Require, SDKModule, SDKVersion)
	}
	if len(f.Replace) != 1 || f.Replace[0].Old.Path != SDKModule || f.Replace[0].New.Path != sdkDir(t) {
		t.Errorf("go.mod replaces %+v; want %s => %s", f.Replace, SDKModule, sdkDir(t))
	}
}

// checkGoFiles checks that every Go file parses and is gofmt'ed, and that
// no file still holds a template action.
func checkGoFiles(t *testing.T, dir string, files []string) {
	t.Helper()
	for _, name := range files {
		src := read(t, dir, name)
		if strings.Contains(src, "[[") || strings.Contains(src, "]]") {
			t.Errorf("%s holds a template action", name)
		}
		if !strings.HasSuffix(name, ".go") {
			continue
		}
		if _, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ParseComments); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if formatted, err := format.Source([]byte(src)); err != nil || !bytes.Equal(formatted, []byte(src)) {
			t.Errorf("%s is not gofmt'ed (%v)", name, err)
		}
	}
}

func read(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Names, families, methods and module paths a module cannot be written
// with are refused with ErrInvalid, naming what is wrong, before anything
// is written.
func TestInvalid(t *testing.T) {
	sdk := sdkDir(t)
	cases := []struct {
		name string
		err  func(dir string) error
		want string
	}{
		{"plugin name with a capital", func(d string) error { _, err := WritePlugin(d, Plugin{Name: "Greet", SDKDir: sdk}); return err }, `plugin name "Greet"`},
		{"plugin name with a dot", func(d string) error { _, err := WritePlugin(d, Plugin{Name: "acme.greet", SDKDir: sdk}); return err }, `plugin name "acme.greet"`},
		{"family of one segment", func(d string) error {
			_, err := WritePlugin(d, Plugin{Name: "greet", Family: "greet", SDKDir: sdk})
			return err
		}, `family "greet": a vendor family is "org.name"`},
		{"core family", func(d string) error {
			_, err := WritePlugin(d, Plugin{Name: "greet", Family: "aiEnvelope", SDKDir: sdk})
			return err
		}, "is a core family"},
		{"reserved org", func(d string) error {
			_, err := WritePlugin(d, Plugin{Name: "greet", Family: "openwop.greet", SDKDir: sdk})
			return err
		}, "reserved"},
		{"org no error code can have", func(d string) error {
			_, err := WritePlugin(d, Plugin{Name: "greet", Family: "acme-.greet", SDKDir: sdk})
			return err
		}, `its org "acme-"`},
		{"method with a dot", func(d string) error {
			_, err := WritePlugin(d, Plugin{Name: "greet", Method: "say.hello", SDKDir: sdk})
			return err
		}, `method "say.hello"`},
		{"module path", func(d string) error {
			_, err := WritePlugin(d, Plugin{Name: "greet", Module: "example.com/a b", SDKDir: sdk})
			return err
		}, "module path"},
		{"pack name of two segments", func(d string) error { _, err := WritePack(d, Pack{Name: "community.notes", SDKDir: sdk}); return err }, `pack name "community.notes" must be a scope`},
		{"node typeId", func(d string) error {
			_, err := WritePack(d, Pack{Name: "community.acme.notes", Node: "count", SDKDir: sdk})
			return err
		}, `node typeId "count"`},
		{"pack runtime that shares a prefix", func(d string) error {
			_, err := WritePack(d, Pack{Name: "community.acme.notes", Runtime: "wasmx", SDKDir: sdk})
			return err
		}, `runtime "wasmx": a pack's runtime is "go" or "wasm"`},
		{"no SDK", func(d string) error { _, err := WritePlugin(d, Plugin{Name: "greet"}); return err }, "no SDK directory"},
		{"SDK version and directory", func(d string) error {
			_, err := WritePlugin(d, Plugin{Name: "greet", SDKVersion: "v0.2.0", SDKDir: sdk})
			return err
		}, "both given"},
		{"SDK version not canonical", func(d string) error {
			_, err := WritePack(d, Pack{Name: "community.acme.notes", SDKVersion: "v0.2"})
			return err
		}, `SDK version "v0.2": a version of the SDK module is a canonical semantic version`},
		{"SDK version without v", func(d string) error {
			_, err := WritePlugin(d, Plugin{Name: "greet", SDKVersion: "0.2.0"})
			return err
		}, `SDK version "0.2.0"`},
		{"SDK version with build metadata", func(d string) error {
			_, err := WritePlugin(d, Plugin{Name: "greet", SDKVersion: "v0.2.0+meta"})
			return err
		}, `SDK version "v0.2.0+meta"`},
		{"SDK version of another major version", func(d string) error {
			_, err := WritePlugin(d, Plugin{Name: "greet", SDKVersion: "v2.0.0"})
			return err
		}, `SDK version "v2.0.0": `},
		{"not the SDK", func(d string) error {
			_, err := WritePlugin(d, Plugin{Name: "greet", SDKDir: filepath.Dir(sdk)})
			return err
		}, `is module "github.com/wophost/wophost", not the wophost SDK`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			err := c.err(dir)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want ErrInvalid saying %q", err, c.want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the directory was created (%v)", err)
			}
		})
	}
}

// A directory with anything in it is never written into; an empty one is.
func TestDirectory(t *testing.T) {
	sdk := sdkDir(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := WritePlugin(dir, Plugin{Name: "greet", SDKDir: sdk})
	if err == nil || errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "is not empty (it has notes.txt)") {
		t.Fatalf("writing into a directory with a file: %v; want it refused as not empty", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory has %d entries after the refusal; want only the file", len(entries))
	}

	empty := t.TempDir()
	if _, err := WritePack(empty, Pack{Name: "community.acme.notes", SDKDir: sdk}); err != nil {
		t.Fatalf("writing into an empty directory: %v", err)
	}
	if _, err := WritePack(empty, Pack{Name: "community.acme.notes", SDKDir: sdk}); err == nil {
		t.Fatal("a second write into the same directory succeeded")
	}
}

// FindSDK finds the sdk directory beside a checkout's bin/, else one
// above the working directory, and otherwise asks for --sdk.
func TestFindSDK(t *testing.T) {
	sdkMod := "module " + SDKModule + "\n\ngo 1.26.0\n"
	checkout := t.TempDir()
	mustWrite(t, filepath.Join(checkout, "sdk", "go.mod"), sdkMod)
	mustWrite(t, filepath.Join(checkout, "bin", "host"), "")
	elsewhere := t.TempDir()
	mustWrite(t, filepath.Join(elsewhere, "bin", "host"), "")
	// A directory called sdk holding another module is no SDK.
	mustWrite(t, filepath.Join(elsewhere, "sdk", "go.mod"), "module example.com/sdk\n\ngo 1.26.0\n")

	got, err := FindSDK(filepath.Join(checkout, "bin", "host"), elsewhere)
	if err != nil || got != filepath.Join(checkout, "sdk") {
		t.Errorf("beside the binary: %q, %v", got, err)
	}
	deep := filepath.Join(checkout, "work", "new")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err = FindSDK(filepath.Join(elsewhere, "bin", "host"), deep)
	if err != nil || got != filepath.Join(checkout, "sdk") {
		t.Errorf("above the working directory: %q, %v", got, err)
	}
	_, err = FindSDK(filepath.Join(elsewhere, "bin", "host"), elsewhere)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "pass --sdk") {
		t.Errorf("nowhere: %v; want ErrInvalid asking for --sdk", err)
	}
}

func mustWrite(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
