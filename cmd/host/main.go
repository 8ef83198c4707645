// Command host is the wophost host: it loads the capability plugins and
// node packs declared in host.hcl, advertises the families that loaded, and
// runs nodes.
package main

import (
	"os"

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

// newHost returns a host for cfg whose launcher is this binary.
func newHost(cfg *config.Config, ldr *config.Loader, logger hclog.Logger) *host.Host {
	var opts host.Options
	if self, err := os.Executable(); err == nil {
		opts.Launcher = self
	} else {
		logger.Warn("packs run uncontained: the host cannot find its own binary to contain them with", "error", err)
	}
	return host.NewWithOptions(cfg, ldr, logger, version, opts)
}
