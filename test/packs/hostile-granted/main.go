// Command hostile-granted is the hostile pack's node under a manifest
// that declares runtime requirements (net.outbound and subprocess): a
// host grants them or refuses the pack at load.
package main

import (
	_ "embed"

	"github.com/wophost/wophost/test/packs/hostile/reach"
)

//go:embed pack.json
var manifest []byte

func main() {
	reach.Main(manifest, "granted.try")
}
