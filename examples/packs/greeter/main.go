// Command greeter is a node pack with one node, greeter.welcome.
package main

import (
	_ "embed"

	"github.com/wophost/wophost/sdk/pack"
)

//go:embed pack.json
var manifest []byte

type welcomeInput struct {
	Name string `json:"name"`
}

func welcome(ctx *pack.Ctx, in *welcomeInput) (map[string]string, error) {
	var out struct {
		Greeting string `json:"greeting"`
	}
	if err := ctx.Call("acme.hello", "greet", in, &out); err != nil {
		return nil, err // a *wop.Error reaches the host unchanged
	}
	return map[string]string{"message": out.Greeting}, nil
}

func main() {
	pack.Serve(&pack.Pack{
		Manifest: manifest,
		Nodes:    map[string]pack.Node{"greeter.welcome": pack.TypedNode(welcome)},
	})
}
