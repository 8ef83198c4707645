// Command wophost-kv is an example capability plugin serving the vendor
// family acme.kv: get, put and delete on an embedded store file in the
// plugin's state directory.
package main

import "github.com/wophost/wophost/sdk/plugin"

func main() { plugin.Serve(newPlugin()) }
