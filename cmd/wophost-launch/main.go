// Command wophost-launch contains a process the host starts: it confines
// itself as the host's spec says and execs the process's entry (package
// sandbox). The host binary can do the same, but starts in tens of
// milliseconds where this one, linking nothing but the sandbox, starts in
// one or two; the host uses it when it lies beside the host binary.
package main

import (
	"fmt"
	"os"

	"github.com/wophost/wophost/core/sandbox"
)

func main() {
	if !sandbox.IsLaunch(os.Args) {
		fmt.Fprintln(os.Stderr, "wophost-launch is started by the host to contain a pack or plugin; it is not run by hand")
		os.Exit(2)
	}
	os.Exit(sandbox.Launch(os.Args))
}
