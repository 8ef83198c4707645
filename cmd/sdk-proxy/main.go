// Command sdk-proxy writes the SDK module, as a commit of the repository
// holds it, into a directory laid out as a Go module proxy, for
// GOPROXY=file://DIR: a vendor's module then requires the SDK at that
// version with no replace directive (see docs/development.md, cutting an
// SDK release).
//
// The version is the commit's sdk/vX.Y.Z tag, else the pseudo-version the
// go command would give the commit, unless -version names one.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/wophost/wophost/internal/goproxy"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command with its arguments and output streams; it returns
// the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("sdk-proxy", flag.ContinueOnError)
	fl.SetOutput(stderr)
	var o goproxy.Options
	asJSON := false
	fl.StringVar(&o.Repo, "repo", ".", "top directory of the repository's git work tree")
	fl.StringVar(&o.Subdir, "subdir", "sdk", "the module's directory in the repository; its tags are SUBDIR/vX.Y.Z")
	fl.StringVar(&o.Rev, "rev", "", "commit to write (default: the tag of -version when there is one, else HEAD)")
	fl.StringVar(&o.Version, "version", "", "version to write the commit as (default: its SUBDIR/v* tag, else its pseudo-version)")
	fl.StringVar(&o.Out, "out", "dist/goproxy", "the proxy directory; versions already in it are kept")
	fl.BoolVar(&asJSON, "json", false, "print what was written as JSON")
	fl.Usage = func() {
		fmt.Fprintf(stderr, "usage: sdk-proxy [flags]\n\nWrites the module of -subdir at one commit into -out as a Go module proxy directory (GOPROXY=file://DIR).\n\n")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "sdk-proxy: unexpected argument %q\n", fl.Arg(0))
		fl.Usage()
		return 2
	}
	res, err := goproxy.Build(o)
	if err != nil {
		fmt.Fprintf(stderr, "sdk-proxy: %v\n", err)
		return 1
	}
	if res.Dirty {
		fmt.Fprintf(stderr, "sdk-proxy: warning: %s has changes not committed; the module is commit %s without them\n", o.Subdir, res.Commit)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(stderr, "sdk-proxy: %v\n", err)
			return 1
		}
		return 0
	}
	from := "no tag"
	if res.Tag != "" {
		from = "tag " + res.Tag
	}
	state := "wrote"
	if res.Existed {
		state = "already had, with the same content,"
	}
	fmt.Fprintf(stdout, "%s %s %s in %s (commit %s, %s)\n", state, res.Module, res.Version, o.Out, res.Commit, from)
	fmt.Fprintf(stdout, "go.sum lines:\n  %s %s %s\n  %s %s/go.mod %s\n", res.Module, res.Version, res.Sum, res.Module, res.Version, res.ModSum)
	return 0
}
