//go:build !wasip1

package wasmpack

// Serve checks p and panics when it does not hold together: the manifest
// has no name, or a node of the manifest has no handler, or a handler no
// node of the manifest. Built for another platform than wasip1, that is
// all it does, so that a pack's tests fail on such a mistake; the pack
// runs only as a WebAssembly module.
func Serve(p *Pack) {
	mustServer(p)
}
