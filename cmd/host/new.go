package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wophost/wophost/internal/scaffold"
)

// sdkVersion is the version of the SDK this host was built with, set at
// build time with -ldflags "-X main.sdkVersion=vX.Y.Z" (make sets it from
// the sdk/vX.Y.Z tag on the commit built); empty in a development build.
// `host new` requires that version, which the host's protocol speaks,
// rather than replacing the SDK with a checkout's.
var sdkVersion string

// newFlags are the flags both `host new` commands take.
type newFlags struct {
	dir        string
	module     string
	sdk        string
	sdkVersion string
	tidy       bool
}

// register adds the flags to c; what names what c writes, and module is
// the module path's default as help shows it.
func (f *newFlags) register(c *cobra.Command, what, module string) {
	c.Flags().StringVar(&f.dir, "dir", "", "directory to write the "+what+" into, new or empty (default ./NAME)")
	c.Flags().StringVar(&f.module, "module", "", "Go module path (default "+module+")")
	c.Flags().StringVar(&f.sdk, "sdk", "", "sdk directory of a wophost checkout for go.mod's replace line to name, instead of requiring a version of the SDK (default, in a development build of the host: that of the checkout the host binary is in, else one above the working directory)")
	c.Flags().StringVar(&f.sdkVersion, "sdk-version", "", "version of the SDK module for go.mod to require, with no replace line (default: the version this host was built with, if it names one)")
	c.Flags().BoolVar(&f.tidy, "tidy", false, "run go mod tidy in the new module (needs the go command, and the module proxy unless the module cache has the SDK's dependencies)")
}

// sdkSource is where the module written gets the SDK: a version to
// require (--sdk-version, else built, the version this host was built
// with), or, with neither, a checkout's sdk directory to replace it with
// (--sdk, else the one sdkDir finds). --sdk chooses a checkout even when
// the host names a version.
func (f *newFlags) sdkSource(built string) (dir, version string, err error) {
	switch {
	case f.sdk != "" && f.sdkVersion != "":
		return "", "", fmt.Errorf("%w: --sdk and --sdk-version exclude each other: go.mod replaces the SDK with a checkout's or requires a version of it", scaffold.ErrInvalid)
	case f.sdkVersion != "":
		return "", f.sdkVersion, nil
	case f.sdk != "":
		return f.sdk, "", nil
	case built != "":
		// Not the caller's mistake, so not ErrInvalid: the build's.
		if err := scaffold.CheckSDKVersion(built); err != nil {
			return "", "", fmt.Errorf("this host was built naming the SDK version %q, which is none (%v): pass --sdk-version or --sdk", built, err)
		}
		return "", built, nil
	}
	dir, err = f.sdkDir()
	return dir, "", err
}

// sdkDir is the SDK of the checkout the running host was built in, else
// one above the working directory.
func (f *newFlags) sdkDir() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		exe = ""
	}
	wd, err := os.Getwd()
	if err != nil {
		wd = ""
	}
	return scaffold.FindSDK(exe, wd)
}

func (f *newFlags) target(name string) string {
	if f.dir != "" {
		return f.dir
	}
	return name
}

func newCommand(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "new",
		Short: "write a starting point: a Go module for a capability plugin or a node pack",
	}
	c.AddCommand(newPluginCommand(g), newPackCommand(g))
	return c
}

func newPluginCommand(g *globals) *cobra.Command {
	var f newFlags
	var family, method string
	var pure bool
	c := &cobra.Command{
		Use:   "plugin NAME",
		Short: "write a Go capability plugin serving one vendor family, its conformance test and a host.hcl that runs it",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p := scaffold.Plugin{Name: args[0], Family: family, Method: method, Pure: pure, Module: f.module}
			if err := p.Validate(); err != nil {
				return newError(err)
			}
			var err error
			if p.SDKDir, p.SDKVersion, err = f.sdkSource(g.sdkVersion); err != nil {
				return newError(err)
			}
			res, err := scaffold.WritePlugin(f.target(args[0]), p)
			if err != nil {
				return newError(err)
			}
			return g.reportNew(f, res, "call")
		},
	}
	f.register(c, "plugin", "example.com/NAME")
	c.Flags().StringVar(&family, "family", "", `vendor family the plugin serves, "org.name" (default example.NAME)`)
	c.Flags().StringVar(&method, "method", "", "the family's method (default greet)")
	c.Flags().BoolVar(&pure, "pure", false, "declare the method pure: it changes nothing and answers a request the same way each time, so a replay calls it again (default: not pure, a replay answers it from the run's log)")
	return c
}

func newPackCommand(g *globals) *cobra.Command {
	var f newFlags
	var node, runtime string
	c := &cobra.Command{
		Use:   "pack NAME",
		Short: "write a Go node pack with one node, its pack.json and schemas, a test and a host.hcl that loads it",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p := scaffold.Pack{Name: args[0], Node: node, Module: f.module, Runtime: runtime}
			if err := p.Validate(); err != nil {
				return newError(err)
			}
			var err error
			if p.SDKDir, p.SDKVersion, err = f.sdkSource(g.sdkVersion); err != nil {
				return newError(err)
			}
			res, err := scaffold.WritePack(f.target(args[0]), p)
			if err != nil {
				return newError(err)
			}
			return g.reportNew(f, res, "run")
		},
	}
	f.register(c, "pack", "example.com/ and the name's last segment")
	c.Flags().StringVar(&node, "node", "", "typeId of the pack's node (default: the name's last segment, lowercased, then .count)")
	c.Flags().StringVar(&runtime, "runtime", scaffold.RuntimeGo, `how the pack runs: "go", a process of its own (sdk/pack), or "wasm", a WebAssembly module the host runs inside itself (sdk/wasmpack)`)
	return c
}

// newError makes a scaffold error a usage error (exit 2) when it is about
// what was asked, and a failure (exit 1) otherwise.
func newError(err error) error {
	if errors.Is(err, scaffold.ErrInvalid) {
		// The wrapped sentinel's text adds nothing for a reader.
		return errors.New(strings.TrimPrefix(err.Error(), scaffold.ErrInvalid.Error()+": "))
	}
	return &failure{err}
}

// hostCommand is how the next steps name the host: the running
// executable's path, so they can be pasted as they are.
func hostCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "host"
	}
	return exe
}

// reportNew runs go mod tidy if asked, and prints what was written and
// the steps that build, test and run it; verb is the host command that
// runs it (call or run).
func (g *globals) reportNew(f newFlags, res *scaffold.Result, verb string) error {
	run := fmt.Sprintf("echo '%s' | %s --config host.hcl %s %s --input -", res.Input, hostCommand(), verb, res.Target)
	next := []string{"cd " + f.shownDir(res)}
	if f.tidy {
		if err := scaffold.Tidy(res.Dir, g.stderr); err != nil {
			return &failure{err}
		}
	} else {
		next = append(next, "go mod tidy")
	}
	next = append(next, "go test ./...", res.Build)
	if verb == "call" {
		// A plugin comes with its conformance file.
		next = append(next, hostCommand()+" conformance --config conformance.hcl")
	}
	next = append(next, run)
	work := goWorkSteps(res)
	if g.json {
		report := map[string]any{
			"dir": res.Dir, "module": res.Module, "sdk": res.SDKDir, "files": res.Files, "tidied": f.tidy, "next": next,
		}
		if work != nil {
			report["goWork"] = work
		} else {
			report["sdkVersion"] = res.SDKVersion
		}
		return writeJSON(g.stdout, report, true)
	}
	if res.SDKDir != "" {
		fmt.Fprintf(g.stdout, "wrote %s: module %s, SDK from %s\n", res.Dir, res.Module, res.SDKDir)
	} else {
		fmt.Fprintf(g.stdout, "wrote %s: module %s, SDK %s\n", res.Dir, res.Module, res.SDKVersion)
	}
	for _, file := range res.Files {
		fmt.Fprintf(g.stdout, "  %s\n", file)
	}
	if f.tidy {
		fmt.Fprintln(g.stdout, "ran go mod tidy: go.sum written")
	}
	fmt.Fprintln(g.stdout, "next:")
	for _, step := range next {
		fmt.Fprintf(g.stdout, "  %s\n", step)
	}
	if work != nil {
		fmt.Fprintln(g.stdout, "or, for a go.work rather than go.mod's replace line (then skip go mod tidy, which ignores go.work):")
		for _, step := range work {
			fmt.Fprintf(g.stdout, "  %s\n", step)
		}
	}
	return nil
}

// goWorkSteps are the commands that turn a module whose go.mod replaces
// the SDK with a checkout into one a go.work builds against that
// checkout; nil for a module requiring a version of the SDK. The require
// goes with the replace: its placeholder version is none the go command
// can fetch, and a workspace still reads the go.mod of every version its
// modules require.
func goWorkSteps(res *scaffold.Result) []string {
	if res.SDKDir == "" {
		return nil
	}
	return []string{
		"go mod edit -dropreplace " + scaffold.SDKModule + " -droprequire " + scaffold.SDKModule,
		"go work init . " + res.SDKDir,
	}
}

// shownDir is the directory as the user named it, for the cd step.
func (f newFlags) shownDir(res *scaffold.Result) string {
	if f.dir != "" {
		return f.dir
	}
	return filepath.Base(res.Dir)
}
