// Command host is the wophost host: it loads the capability plugins and
// node packs declared in host.hcl, advertises the families that loaded, and
// runs nodes.
package main

import (
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
