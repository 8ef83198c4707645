package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/internal/scaffold"
)

// checkoutSDK is the sdk directory of this checkout.
func checkoutSDK(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "sdk"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// runNew runs `host new ARGS` with g, a host built naming g.sdkVersion.
func runNew(g *globals, args ...string) error {
	c := newCommand(g)
	c.SetArgs(args)
	c.SetOut(g.stdout)
	c.SetErr(g.stderr)
	c.SilenceUsage, c.SilenceErrors = true, true
	return c.Execute()
}

// sdkOf returns what go.mod in dir says of the SDK: the version required,
// and the directory it is replaced with ("" for none).
func sdkOf(t *testing.T, dir string) (version, replacedBy string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("go.mod", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == scaffold.SDKModule {
			version = r.Mod.Version
		}
	}
	for _, r := range f.Replace {
		if r.Old.Path == scaffold.SDKModule {
			replacedBy = r.New.Path
		}
	}
	return version, replacedBy
}

// A host built naming a version of the SDK writes a go.mod requiring that
// version with no replace line, and says so; --sdk-version names another,
// and --sdk still chooses a checkout, with the go.work alternative shown.
// A development build (no version) replaces the SDK with the checkout.
func TestNewSDKVersion(t *testing.T) {
	sdk := checkoutSDK(t)
	cases := []struct {
		name        string
		built       string
		args        []string
		wantVersion string
		wantReplace string
	}{
		{"built with a version", "v0.3.0", nil, "v0.3.0", ""},
		{"--sdk-version", "v0.3.0", []string{"--sdk-version", "v0.4.0-rc.1"}, "v0.4.0-rc.1", ""},
		{"--sdk-version in a development build", "", []string{"--sdk-version", "v0.4.0"}, "v0.4.0", ""},
		{"--sdk in a host built with a version", "v0.3.0", []string{"--sdk", sdk}, scaffold.SDKVersion, sdk},
		{"a development build", "", []string{"--sdk", sdk}, scaffold.SDKVersion, sdk},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, kind := range []string{"plugin", "pack"} {
				dir := filepath.Join(t.TempDir(), kind)
				var stdout, stderr bytes.Buffer
				g := &globals{stdout: &stdout, stderr: &stderr, sdkVersion: c.built}
				name := "greet"
				if kind == "pack" {
					name = "community.acme.notes"
				}
				if err := runNew(g, append([]string{kind, name, "--dir", dir}, c.args...)...); err != nil {
					t.Fatalf("host new %s: %v\n%s", kind, err, stderr.String())
				}
				version, replacedBy := sdkOf(t, dir)
				if version != c.wantVersion || replacedBy != c.wantReplace {
					t.Errorf("%s: go.mod requires the SDK at %q replaced by %q; want %q replaced by %q", kind, version, replacedBy, c.wantVersion, c.wantReplace)
				}
				out := stdout.String()
				if c.wantReplace == "" {
					if !strings.Contains(out, ", SDK "+c.wantVersion+"\n") || strings.Contains(out, "go.work") {
						t.Errorf("%s: the report does not name the SDK version alone:\n%s", kind, out)
					}
				} else {
					for _, want := range []string{", SDK from " + sdk + "\n", "for a go.work rather than go.mod's replace line",
						"\n  go mod edit -dropreplace github.com/wophost/wophost/sdk -droprequire github.com/wophost/wophost/sdk\n",
						"\n  go work init . " + sdk + "\n"} {
						if !strings.Contains(out, want) {
							t.Errorf("%s: the report lacks %q:\n%s", kind, want, out)
						}
					}
				}
			}
		})
	}
}

// --json reports the SDK version with no go.work steps for a module
// requiring a version, and the checkout with the go.work steps for one
// replacing it.
func TestNewSDKVersionJSON(t *testing.T) {
	for _, c := range []struct {
		built string
		args  []string
	}{{"v0.3.0", nil}, {"", []string{"--sdk", checkoutSDK(t)}}} {
		var stdout, stderr bytes.Buffer
		g := &globals{stdout: &stdout, stderr: &stderr, json: true, sdkVersion: c.built}
		dir := filepath.Join(t.TempDir(), "greet")
		if err := runNew(g, append([]string{"plugin", "greet", "--dir", dir}, c.args...)...); err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		var report map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
			t.Fatal(err)
		}
		_, hasVersion := report["sdkVersion"]
		work, hasWork := report["goWork"].([]any)
		if c.built != "" {
			if report["sdkVersion"] != c.built || report["sdk"] != "" || hasWork {
				t.Errorf("built with %s: %v", c.built, report)
			}
		} else if hasVersion || report["sdk"] != checkoutSDK(t) || len(work) != 2 {
			t.Errorf("a development build with --sdk: %v", report)
		}
	}
}

// --sdk with --sdk-version, and a version that is none, are usage errors
// and write nothing; a host built naming a version that is none fails
// (not the caller's mistake) and says what to pass.
func TestNewSDKVersionRefused(t *testing.T) {
	sdk := checkoutSDK(t)
	for _, c := range []struct {
		name    string
		built   string
		args    []string
		want    string
		invalid bool
	}{
		{"both", "", []string{"--sdk", sdk, "--sdk-version", "v0.3.0"}, "--sdk and --sdk-version exclude each other", true},
		{"not canonical", "", []string{"--sdk-version", "v0.3"}, `SDK version "v0.3"`, true},
		{"another major version", "", []string{"--sdk-version", "v2.0.0"}, `SDK version "v2.0.0"`, true},
		{"built with none", "0.3.0", nil, `this host was built naming the SDK version "0.3.0", which is none`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "greet")
			var stdout, stderr bytes.Buffer
			g := &globals{stdout: &stdout, stderr: &stderr, sdkVersion: c.built}
			err := runNew(g, append([]string{"plugin", "greet", "--dir", dir}, c.args...)...)
			var f *failure
			if err == nil || !strings.Contains(err.Error(), c.want) || errors.As(err, &f) == c.invalid {
				t.Fatalf("error %v (a failure: %t); want one saying %q, a usage error: %t", err, errors.As(err, &f), c.want, c.invalid)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the directory was made (%v)", err)
			}
		})
	}
}

// pureField matches a Family's Pure field in a generated main.go.
var pureField = regexp.MustCompile(`(?m)^\s*Pure:\s+\[\]string\{methodPut\},`)

// host new plugin declares its method pure with --pure only: a method
// declared pure is called again on a replay, so a method that writes
// state (put) must not be one by default.
func TestNewPluginPureFlag(t *testing.T) {
	sdk, err := filepath.Abs(filepath.Join("..", "..", "sdk"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		pure bool
	}{
		{nil, false},
		{[]string{"--pure"}, true},
		{[]string{"--pure=false"}, false},
	} {
		dir := filepath.Join(t.TempDir(), "store")
		args := append([]string{"new", "plugin", "store", "--family", "acme.store", "--method", "put", "--dir", dir, "--sdk", sdk}, c.args...)
		var stdout, stderr bytes.Buffer
		if code := execute(args, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr.String())
		}
		main, err := os.ReadFile(filepath.Join(dir, "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		if got := pureField.Match(main); got != c.pure {
			t.Errorf("%q: main.go declares put pure: %v, want %v", c.args, got, c.pure)
		}
	}
}

// loadable loads the pack.json in dir as the host loads it, schemas
// included, and fails t on any problem.
func loadable(t *testing.T, dir string) {
	t.Helper()
	if _, _, err := packmanifest.Load(dir); err != nil {
		t.Fatalf("pack.json does not load: %v", err)
	}
}

// host new pack --runtime wasm writes a WebAssembly pack: its pack.json
// names the module as entry and loads, the build step it prints makes a
// WebAssembly module of it against the checkout's SDK, and its test
// passes natively.
func TestNewPackWasm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	dir := filepath.Join(t.TempDir(), "wnotes")
	var stdout, stderr bytes.Buffer
	g := &globals{stdout: &stdout, stderr: &stderr}
	if err := runNew(g, "pack", "community.acme.wnotes", "--runtime", "wasm", "--dir", dir, "--sdk", checkoutSDK(t)); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var m packmanifest.Manifest
	if data, err := os.ReadFile(filepath.Join(dir, "pack.json")); err != nil || json.Unmarshal(data, &m) != nil {
		t.Fatalf("pack.json: %v", err)
	}
	if m.Runtime.Language != "wasm" || m.Runtime.Entry != "bin/wnotes.wasm" || m.Runtime.Format != "wasm" {
		t.Errorf("pack.json runtime %+v", m.Runtime)
	}
	loadable(t, dir)
	var build string
	for _, line := range strings.Split(stdout.String(), "\n") {
		if s := strings.TrimSpace(line); strings.HasPrefix(s, "GOOS=wasip1 ") {
			build = s
		}
	}
	if build != "GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o bin/wnotes.wasm ." {
		t.Fatalf("the report's build step is %q:\n%s", build, stdout.String())
	}
	// The checkout's go.sum stands in for go mod tidy, as for the docs'
	// Go blocks: the module needs nothing the SDK does not.
	sum, err := os.ReadFile(filepath.Join(checkoutSDK(t), "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	words := strings.Fields(build)
	goIn := func(env []string, args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0"), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s go %s: %v\n%s", env, strings.Join(args, " "), err, out)
		}
	}
	goIn(words[:2], words[3:]...)
	wasm, err := os.ReadFile(filepath.Join(dir, "bin", "wnotes.wasm"))
	if err != nil || !bytes.HasPrefix(wasm, []byte("\x00asm\x01\x00\x00\x00")) {
		t.Fatalf("bin/wnotes.wasm is no WebAssembly module (%v)", err)
	}
	goIn(nil, "test", "-count=1", "./...")
}

// --runtime go writes the process pack, as no --runtime does; a runtime
// that is neither, even one sharing a prefix, is a usage error naming the
// allowed values, and writes nothing.
func TestNewPackRuntime(t *testing.T) {
	for _, c := range []struct {
		runtime, want string
	}{{"go", "go build -o notes .\n"}, {"", "go build -o notes .\n"}, {"wasm", "go build -buildmode=c-shared -o bin/notes.wasm .\n"}} {
		dir := filepath.Join(t.TempDir(), "notes")
		var stdout, stderr bytes.Buffer
		args := []string{"pack", "community.acme.notes", "--dir", dir, "--sdk", checkoutSDK(t)}
		if c.runtime != "" {
			args = append(args, "--runtime", c.runtime)
		}
		if err := runNew(&globals{stdout: &stdout, stderr: &stderr}, args...); err != nil {
			t.Fatalf("--runtime %q: %v", c.runtime, err)
		}
		main, err := os.ReadFile(filepath.Join(dir, "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		wasm := c.runtime == "wasm"
		if !strings.Contains(stdout.String(), c.want) ||
			strings.Contains(string(main), "sdk/wasmpack") != wasm || strings.Contains(string(main), "sdk/pack\"") == wasm {
			t.Errorf("--runtime %q: main.go uses wasmpack: %v; report:\n%s", c.runtime, strings.Contains(string(main), "sdk/wasmpack"), stdout.String())
		}
	}
	for _, rt := range []string{"wasmx", "wasi", "Go"} {
		dir := filepath.Join(t.TempDir(), "notes")
		var stdout, stderr bytes.Buffer
		err := runNew(&globals{stdout: &stdout, stderr: &stderr}, "pack", "community.acme.notes", "--dir", dir, "--sdk", checkoutSDK(t), "--runtime", rt)
		var f *failure
		if err == nil || errors.As(err, &f) || !strings.Contains(err.Error(), `runtime "`+rt+`": a pack's runtime is "go" or "wasm"`) {
			t.Errorf("--runtime %s: %v; want a usage error naming go and wasm", rt, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--runtime %s: the directory was made (%v)", rt, err)
		}
	}
}
