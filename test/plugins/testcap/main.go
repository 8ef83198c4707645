// Command testcap is the capability plugin the integration tests drive. It
// serves test.echo and test.other with methods that echo, sleep, fail,
// crash and call back into the host, so every path of the protocol can be
// exercised through the real host.
//
// TESTCAP_START makes it fail before it is ready, as a broken plugin does:
// "exit" writes a reason to stderr and exits with status 3 before the
// handshake; "bad-record" declares a family record the SDK refuses
// (experimental without an until date), which Serve reports and exits on.
package main

import (
	"fmt"
	"os"

	"github.com/wophost/wophost/sdk/plugin"
)

func main() {
	p := newPlugin()
	switch os.Getenv("TESTCAP_START") {
	case "exit":
		fmt.Fprintln(os.Stderr, "testcap: cannot read /etc/testcap/model.bin: no such file or directory")
		os.Exit(3)
	case "bad-record":
		p.Families[0].Until = ""
	}
	plugin.Serve(p)
}
