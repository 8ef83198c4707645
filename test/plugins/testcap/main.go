// Command testcap is the capability plugin the integration tests drive. It
// serves test.echo and test.other with methods that echo, sleep, fail,
// crash and call back into the host, so every path of the protocol can be
// exercised through the real host.
package main

import "github.com/wophost/wophost/sdk/plugin"

func main() { plugin.Serve(newPlugin()) }
