// Package scaffold writes the starting points `host new` makes: a Go module
// for a capability plugin or for a node pack that builds against the SDK,
// passes its own tests and runs under the host with the host.hcl written
// beside it.
//
// The go.mod written requires the SDK module (github.com/wophost/wophost/sdk)
// at a version of it (its tags are sdk/vX.Y.Z), or, to build against a
// local wophost checkout, at a placeholder version with a replace directive
// naming the checkout's sdk directory. go.sum is not written: `go mod tidy`
// (Tidy) resolves the SDK and its dependencies from the module proxy or
// cache.
package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/sdk/wop"
)

// SDKModule is the module path of the wophost SDK.
const SDKModule = "github.com/wophost/wophost/sdk"

// SDKVersion is the version a written go.mod requires the SDK at when a
// replace directive provides it: the placeholder Go itself writes for such
// a module. The replace decides which code is built.
const SDKVersion = "v0.0.0-00010101000000-000000000000"

// SDKGoVersion is the go directive of the SDK's go.mod, which a go.mod
// written for a version of the SDK, with no checkout to read it from,
// states. A test keeps it equal to sdk/go.mod's; `go mod tidy` raises it
// if the version required needs a later Go.
const SDKGoVersion = "1.26.0"

// ErrInvalid is wrapped by every error about what the caller asked for (a
// name, a flag's value, a missing SDK directory) rather than about writing
// it.
var ErrInvalid = errors.New("invalid request")

// invalidf returns an error wrapping ErrInvalid.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

//go:embed templates
var templates embed.FS

// Plugin is what WritePlugin writes.
type Plugin struct {
	// Name names the plugin: its executable, its capability block in
	// host.hcl and Plugin.Name. Lowercase letters, digits and dashes,
	// starting with a letter.
	Name string
	// Family is the vendor family it serves, "org.name"; empty means
	// "example.NAME". Its org is also the org of the family's error codes.
	Family string
	// Method is the family's one method; empty means "greet".
	Method string
	// Pure declares Method pure: it changes nothing and answers a request
	// the same way each time, so a replay calls it again rather than
	// answering from the run's log. Off, a replay never calls it again.
	Pure bool
	// Module is the Go module path; empty means "example.com/NAME".
	Module string
	// SDKVersion, when not empty, is the version of the SDK module go.mod
	// requires, such as v0.2.0, with no replace directive; SDKDir must
	// then be empty.
	SDKVersion string
	// SDKDir is the sdk directory of a wophost checkout (see FindSDK),
	// which go.mod's replace directive names when SDKVersion is empty.
	SDKDir string
}

// Pack is what WritePack writes.
type Pack struct {
	// Name is the pack's name by OpenWOP's grammar, such as
	// "community.acme.notes" (packmanifest.CheckName).
	Name string
	// Node is the typeId of its one node; empty means the name's last
	// segment, lowercased, then ".count".
	Node string
	// Module is the Go module path; empty means "example.com/" and the
	// name's last segment.
	Module string
	// Runtime is how the pack runs: RuntimeGo (the default when empty), a
	// process of its own on sdk/pack, or RuntimeWasm, a WebAssembly
	// module on sdk/wasmpack that the host runs inside itself.
	Runtime string
	// SDKVersion and SDKDir are as for Plugin.
	SDKVersion string
	SDKDir     string
}

// Result is what a Write wrote.
type Result struct {
	// Dir is the directory written, absolute.
	Dir string
	// Module is the Go module path of go.mod.
	Module string
	// SDKVersion is the version of the SDK go.mod requires: a version of
	// it, or, when SDKDir is set, the placeholder SDKVersion.
	SDKVersion string
	// SDKDir is the directory go.mod's replace line names, absolute; ""
	// when go.mod requires a version of the SDK with no replace.
	SDKDir string
	// Executable is the file `go build -o` should write, relative to
	// Dir: the plugin host.hcl runs, or the pack's runtime.entry.
	Executable string
	// Build is the command, run in Dir, that builds Executable.
	Build string
	// Target is what the host runs of it: FAMILY.METHOD for `host call`
	// (a plugin), the node's typeId for `host run` (a pack).
	Target string
	// Input is a sample input for Target, as JSON.
	Input string
	// Files are the files written, relative to Dir with forward
	// slashes, sorted.
	Files []string
}

var (
	pluginNamePattern = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	methodPattern     = regexp.MustCompile(`^[a-z][A-Za-z0-9]*$`)
)

// maxNameLen bounds a plugin's name and a method's: they become a file
// name and a Go identifier.
const maxNameLen = 64

// Runtimes of a pack.
const (
	RuntimeGo   = "go"
	RuntimeWasm = "wasm"
)

// data is what the templates see.
type data struct {
	Name, Family, Org, Method, MethodGo string
	Pure                                bool
	Node, Entry, Build                  string
	Module, GoVersion, SDKVersion       string
	SDKDir                              string
}

// goBuild is the command that builds a process's executable entry.
func goBuild(entry string) string { return "go build -o " + entry + " ." }

// Validate returns the error WritePlugin would return for p's name,
// family, method or module path, before any SDK is looked for.
func (p Plugin) Validate() error {
	_, err := p.check()
	return err
}

// check fills p's defaults and returns the templates' data, or an error
// wrapping ErrInvalid naming what is wrong.
func (p Plugin) check() (*data, error) {
	if !pluginNamePattern.MatchString(p.Name) || len(p.Name) > maxNameLen {
		return nil, invalidf("plugin name %q: lowercase letters, digits and dashes, starting with a letter, at most %d characters", p.Name, maxNameLen)
	}
	d := &data{Name: p.Name, Family: p.Family, Method: p.Method, Pure: p.Pure, Module: p.Module, Entry: p.Name, Build: goBuild(p.Name)}
	if d.Family == "" {
		d.Family = "example." + p.Name
	}
	if wop.IsCoreFamily(d.Family) {
		return nil, invalidf("family %q is a core family: a new plugin serves a vendor family, \"org.name\"", d.Family)
	}
	if ok, why := wop.ValidVendorFamily(d.Family); !ok {
		return nil, invalidf("family %q: %s", d.Family, why)
	}
	d.Org, _, _ = strings.Cut(d.Family, ".")
	if !wop.ValidVendorCode(d.Org + ".name_too_long") {
		return nil, invalidf("family %q: its org %q must be lowercase letters and digits in dash-separated words, since the family's error codes are \"%s.<code>\"", d.Family, d.Org, d.Org)
	}
	if d.Method == "" {
		d.Method = "greet"
	}
	if !methodPattern.MatchString(d.Method) || len(d.Method) > maxNameLen {
		return nil, invalidf("method %q: letters and digits, starting with a lowercase letter, at most %d characters", d.Method, maxNameLen)
	}
	d.MethodGo = strings.ToUpper(d.Method[:1]) + d.Method[1:]
	if d.Module == "" {
		d.Module = "example.com/" + p.Name
	}
	return d, checkModule(d.Module)
}

// Validate returns the error WritePack would return for p's name, node
// or module path, before any SDK is looked for.
func (p Pack) Validate() error {
	_, err := p.check()
	return err
}

// check fills p's defaults and returns the templates' data, or an error
// wrapping ErrInvalid naming what is wrong.
func (p Pack) check() (*data, error) {
	if err := packmanifest.CheckName(p.Name); err != nil {
		return nil, invalidf("pack %s", err)
	}
	last := p.Name[strings.LastIndexByte(p.Name, '.')+1:]
	d := &data{Name: p.Name, Node: p.Node, Module: p.Module, Entry: last, Build: goBuild(last)}
	switch p.Runtime {
	case "", RuntimeGo:
	case RuntimeWasm:
		d.Entry = "bin/" + last + ".wasm"
		d.Build = WasmBuild(d.Entry)
	default:
		return nil, invalidf("runtime %q: a pack's runtime is %q or %q", p.Runtime, RuntimeGo, RuntimeWasm)
	}
	if d.Node == "" {
		d.Node = strings.ToLower(last) + ".count"
	}
	if err := packmanifest.CheckTypeID(d.Node); err != nil {
		return nil, invalidf("node %s", err)
	}
	if d.Module == "" {
		d.Module = "example.com/" + last
	}
	return d, checkModule(d.Module)
}

func checkModule(mod string) error {
	if err := module.CheckPath(mod); err != nil {
		return invalidf("module path: %v", err)
	}
	return nil
}

// WritePlugin writes the plugin p into dir, which must not exist or be
// empty: go.mod, main.go (plugin.Serve of one family with one method and
// a config attribute), conformance_test.go (the SDK's conformance kit, on
// the built binary and in process), host.hcl that runs it, README.md and
// .gitignore.
func WritePlugin(dir string, p Plugin) (*Result, error) {
	d, err := p.check()
	if err != nil {
		return nil, err
	}
	res, err := write(dir, []string{"plugin"}, d, p.SDKDir, p.SDKVersion)
	if err != nil {
		return nil, err
	}
	res.Target, res.Input = d.Family+"."+d.Method, `{"name":"Ada"}`
	return res, nil
}

// WasmBuild is the command that builds a WebAssembly pack's module into
// entry: a wasip1 reactor, whose exports the host calls.
func WasmBuild(entry string) string {
	return "GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o " + entry + " ."
}

// WritePack writes the pack p into dir, which must not exist or be empty:
// go.mod, main.go (one node with a typed input and output, served by
// pack.Serve, or by wasmpack.Serve for RuntimeWasm), pack.json, the node's
// schemas under schemas/, pack_test.go, host.hcl that loads it, README.md
// and .gitignore.
func WritePack(dir string, p Pack) (*Result, error) {
	d, err := p.check()
	if err != nil {
		return nil, err
	}
	kinds := []string{"pack"}
	if p.Runtime == RuntimeWasm {
		// The WebAssembly files take the place of the process pack's of
		// the same name; go.mod, the schemas and host.hcl are shared.
		kinds = append(kinds, "pack-wasm")
	}
	res, err := write(dir, kinds, d, p.SDKDir, p.SDKVersion)
	if err != nil {
		return nil, err
	}
	res.Target, res.Input = d.Node, `{"text":"hello, wide world"}`
	return res, nil
}

// write renders the templates under templates/KIND for each of kinds
// with d, a later kind's file replacing an earlier one's of the same
// name, for the SDK at sdkVersion or else in sdkDir (whose go directive it
// reads), and writes them into dir.
func write(dir string, kinds []string, d *data, sdkDir, sdkVersion string) (*Result, error) {
	switch {
	case sdkVersion != "" && sdkDir != "":
		return nil, invalidf("an SDK version (%s) and an SDK directory (%s) both given: go.mod requires a version of the SDK or replaces it with a checkout's", sdkVersion, sdkDir)
	case sdkVersion != "":
		if err := CheckSDKVersion(sdkVersion); err != nil {
			return nil, err
		}
		d.GoVersion, d.SDKVersion = SDKGoVersion, sdkVersion
	case sdkDir == "":
		return nil, invalidf("no SDK directory given")
	default:
		sdk, err := filepath.Abs(sdkDir)
		if err != nil {
			return nil, fmt.Errorf("SDK directory: %w", err)
		}
		if d.GoVersion, err = CheckSDK(sdk); err != nil {
			return nil, err
		}
		d.SDKDir, d.SDKVersion = sdk, SDKVersion
	}
	files := map[string][]byte{}
	for _, kind := range kinds {
		if err := render(kind, d, files); err != nil {
			return nil, err
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("directory: %w", err)
	}
	if err := emptyDir(abs); err != nil {
		return nil, err
	}
	res := &Result{Dir: abs, Module: d.Module, SDKVersion: d.SDKVersion, SDKDir: d.SDKDir, Executable: d.Entry, Build: d.Build}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		target := filepath.Join(abs, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
		// O_EXCL: never replace a file that appeared since the check.
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
		_, err = f.Write(files[name])
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
		res.Files = append(res.Files, name)
	}
	return res, nil
}

// render executes every template of kind (actions between [[ and ]],
// since Go's composite literals are full of braces), putting each file's
// bytes into files by its path in the module. A template "X.tmpl" writes
// X, and "gitignore.tmpl" writes .gitignore (a dot file would not be
// embedded). Go files are gofmt'ed.
func render(kind string, d *data, files map[string][]byte) error {
	root := path.Join("templates", kind)
	return fs.WalkDir(templates, root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		src, err := templates.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(p, root+"/"), ".tmpl")
		if name == "gitignore" {
			name = ".gitignore"
		}
		t, err := template.New(name).Delims("[[", "]]").Option("missingkey=error").Parse(string(src))
		if err != nil {
			return fmt.Errorf("template %s: %w", p, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, d); err != nil {
			return fmt.Errorf("template %s: %w", p, err)
		}
		out := b.Bytes()
		if strings.HasSuffix(name, ".go") {
			if out, err = format.Source(out); err != nil {
				return fmt.Errorf("template %s: gofmt: %w", p, err)
			}
		}
		files[name] = out
		return nil
	})
}

// emptyDir makes sure dir is an empty directory, creating it if need be.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", dir, err)
	case len(entries) > 0:
		return fmt.Errorf("%s is not empty (it has %s): host new writes only into a new or empty directory", dir, entries[0].Name())
	}
	return nil
}

// CheckSDKVersion checks that v can be a version of the SDK module: a
// canonical semantic version (v0.2.0, v0.3.0-rc.1, or a pseudo-version a
// proxy directory of `make sdk-proxy` serves) of its major version, v0 or
// v1. The error wraps ErrInvalid.
func CheckSDKVersion(v string) error {
	if semver.Canonical(v) != v || semver.Build(v) != "" {
		return invalidf("SDK version %q: a version of the SDK module is a canonical semantic version, such as v0.2.0", v)
	}
	if err := module.Check(SDKModule, v); err != nil {
		return invalidf("SDK version %q: %v", v, err)
	}
	return nil
}

// CheckSDK checks that dir holds the wophost SDK module and returns the
// Go version its go.mod states, which a written go.mod states too.
func CheckSDK(dir string) (string, error) {
	gomod := filepath.Join(dir, "go.mod")
	src, err := os.ReadFile(gomod)
	if err != nil {
		return "", invalidf("%s is not the wophost SDK: %v", dir, err)
	}
	f, err := modfile.ParseLax(gomod, src, nil)
	if err != nil {
		return "", invalidf("%s is not the wophost SDK: %v", dir, err)
	}
	if f.Module == nil || f.Module.Mod.Path != SDKModule {
		got := ""
		if f.Module != nil {
			got = f.Module.Mod.Path
		}
		return "", invalidf("%s is module %q, not the wophost SDK %s", gomod, got, SDKModule)
	}
	if f.Go == nil {
		return "", invalidf("%s states no go version", gomod)
	}
	return f.Go.Version, nil
}

// FindSDK looks for the SDK of the checkout the host runs from: the sdk
// directory beside the directory of exe (a checkout's bin/host), then an
// sdk directory in wd or any directory above it. The error, wrapping
// ErrInvalid, asks for the directory.
func FindSDK(exe, wd string) (string, error) {
	try := func(dir string) bool {
		_, err := CheckSDK(dir)
		return err == nil
	}
	if exe != "" {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		if dir := filepath.Join(filepath.Dir(filepath.Dir(exe)), "sdk"); try(dir) {
			return dir, nil
		}
	}
	for d := wd; d != ""; {
		if dir := filepath.Join(d, "sdk"); try(dir) {
			return dir, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	return "", invalidf("this host is a development build, which names no version of the SDK, and no wophost checkout's sdk directory is beside the host binary (%s) or above %s: pass --sdk with the sdk directory of your checkout, or --sdk-version with a version of the SDK", exe, wd)
}

// Tidy runs `go mod tidy` in dir, which resolves the SDK's dependencies
// (from the module cache or the module proxy) and writes go.sum; the go
// command's output goes to out.
func Tidy(dir string, out io.Writer) error {
	cmd := exec.Command("go", "mod", "tidy")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go mod tidy in %s: %w", dir, err)
	}
	return nil
}
