// Command hostile is the node pack the containment tests run: its one
// node, hostile.try, tries to reach what a contained pack must not (the
// host's environment and files, another pack's state, the network, new
// processes, memory and CPU without bound) and reports whether it could.
// Its manifest declares no runtime requirement, so a contained host
// grants it nothing beyond its own directories.
package main

import (
	_ "embed"

	"github.com/wophost/wophost/test/packs/hostile/reach"
)

//go:embed pack.json
var manifest []byte

func main() {
	reach.Main(manifest, "hostile.try")
}
