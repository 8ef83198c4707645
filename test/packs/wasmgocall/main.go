// Command wasmgocall is a WebAssembly node pack built with the Go SDK for
// the host's benchmarks: its node wasmgocall.call makes one host-service
// call, the one its input names, and answers the call's result, as the
// probe pack's probe.call does from a process. Build it with:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o wasmgocall.wasm .
package main

import (
	_ "embed"
	"encoding/json"

	"github.com/wophost/wophost/sdk/wasmpack"
)

//go:embed pack.json
var manifest []byte

// callInput is the node's input, as schemas/call.input.json has it.
type callInput struct {
	Family  string          `json:"family"`
	Method  string          `json:"method"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// call makes the one call; a missing payload is sent as {}, as probe.call
// sends it.
func call(ctx *wasmpack.Ctx, in *callInput) (json.RawMessage, error) {
	payload := in.Payload
	if payload == nil {
		payload = json.RawMessage(`{}`)
	}
	var out json.RawMessage
	if err := ctx.Call(in.Family, in.Method, payload, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// init serves the pack: a WebAssembly reactor's main never runs, its
// package init functions do.
func init() {
	wasmpack.Serve(&wasmpack.Pack{
		Manifest: manifest,
		Nodes:    map[string]wasmpack.Node{"wasmgocall.call": wasmpack.TypedNode(call)},
	})
}

func main() {}
