// Command agentpack is a node pack for the agent tests whose pack.json is
// written by each test: it reads the pack.json beside its executable at
// start, rather than embedding one, so that one binary serves any set of
// agent manifests. Every node it lists makes one ctx call, {family,
// method, payload}, and returns the result.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wophost/wophost/sdk/pack"
)

type callInput struct {
	Family  string          `json:"family"`
	Method  string          `json:"method"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

func call(ctx *pack.Ctx, in *callInput) (json.RawMessage, error) {
	payload := in.Payload
	if payload == nil {
		payload = json.RawMessage(`{}`)
	}
	var out json.RawMessage
	err := ctx.Call(in.Family, in.Method, payload, &out)
	return out, err
}

func main() {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentpack:", err)
		os.Exit(1)
	}
	manifest, err := os.ReadFile(filepath.Join(filepath.Dir(exe), "pack.json"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentpack:", err)
		os.Exit(1)
	}
	var m struct {
		Nodes []struct {
			TypeID string `json:"typeId"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		fmt.Fprintln(os.Stderr, "agentpack: pack.json:", err)
		os.Exit(1)
	}
	nodes := map[string]pack.Node{}
	for _, n := range m.Nodes {
		nodes[n.TypeID] = pack.TypedNode(call)
	}
	pack.Serve(&pack.Pack{Manifest: manifest, Nodes: nodes})
}
