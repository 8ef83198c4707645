// Command kvdemo is the example node pack: nodes that remember, recall and
// forget values through the acme.kv vendor family, and one that describes
// a value with aiEnvelope under a pinned prompt, and one that counts its
// words with an MCP tool.
package main

import (
	_ "embed"

	"github.com/wophost/wophost/sdk/pack"
)

//go:embed pack.json
var manifest []byte

func main() {
	pack.Serve(&pack.Pack{
		Manifest: manifest,
		Nodes: map[string]pack.Node{
			"kvdemo.remember":  pack.TypedNode(remember),
			"kvdemo.recall":    pack.TypedNode(recall),
			"kvdemo.forget":    pack.TypedNode(forget),
			"kvdemo.describe":  pack.TypedNode(describe),
			"kvdemo.wordcount": pack.TypedNode(wordcount),
		},
	})
}
