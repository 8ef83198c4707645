// Command host is the wophost host: it loads the capability plugins and
// node packs declared in host.hcl, advertises the families that loaded, and
// runs nodes.
package main

import (
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/sandbox"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	// The host execs itself to contain a pack: that process confines
	// itself and execs the pack's entry (package sandbox).
	if sandbox.IsLaunch(os.Args) {
		os.Exit(sandbox.Launch(os.Args))
	}
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// newHost returns a host for cfg that contains its packs with launcher
// and sizes its processes' GOMAXPROCS from the CPUs the host started with.
func (g *globals) newHost(cfg *config.Config, ldr *config.Loader, logger hclog.Logger) *host.Host {
	opts := host.Options{CPUs: g.startProcs}
	if l, err := launcher(); err == nil {
		opts.Launcher = l
	} else {
		logger.Warn("packs run uncontained: the host cannot find its own binary to contain them with", "error", err)
	}
	return host.NewWithOptions(cfg, ldr, logger, version, opts)
}

// launcherName is the small launcher binary the host prefers, beside its
// own: it starts in a millisecond or two where the host binary, with
// everything it links, takes tens.
const launcherName = "wophost-launch"

// launcher is the program that contains what the host starts: the
// launcher beside this binary when it is there, a regular executable that
// only its owner may write, or else this binary, which does the same.
func launcher() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	beside := filepath.Join(filepath.Dir(self), launcherName)
	if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 && fi.Mode()&0o022 == 0 {
		return beside, nil
	}
	return self, nil
}
