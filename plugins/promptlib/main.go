// Command wophost-promptlib is the capability plugin serving the
// promptLibrary family (docs/contract.md §4.2) from a file store of pinned,
// immutable prompt versions: get returns a pinned version verbatim, with
// its digest, or fails. It never substitutes another version.
package main

import "github.com/wophost/wophost/sdk/plugin"

func main() { plugin.Serve(newPlugin()) }
