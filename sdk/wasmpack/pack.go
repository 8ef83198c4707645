package wasmpack

import (
	"encoding/json"
	"fmt"

	"github.com/wophost/wophost/sdk/internal/nodepack"
)

// ABIVersion is the version of OpenWOP's WebAssembly ABI this package
// implements, which openwop_abi_version returns.
const ABIVersion = 1

// Pack is a WebAssembly node pack.
type Pack struct {
	// Manifest is the pack.json the module was built with, usually
	// through //go:embed. Its name is the pack name the module reports,
	// and its nodes, in their order, the node ids.
	Manifest []byte
	// Nodes maps each typeId of the manifest to its implementation.
	Nodes map[string]Node
}

// Node runs one node: input is the node's input as the host sent it. The
// result is marshalled to JSON (a json.RawMessage is sent as it is). An
// error should be a *wop.Error, whose code, message and details the host
// receives; any other error reaches it as "internal", and so does a panic.
type Node func(ctx *Ctx, input json.RawMessage) (any, error)

// TypedNode adapts a function over a typed input to a Node. The input is
// read strictly: an unknown field, a duplicate one or invalid UTF-8 is a
// validation_error naming it.
func TypedNode[In, Out any](fn func(ctx *Ctx, in *In) (Out, error)) Node {
	return nodepack.Typed(fn)
}

// server is a checked Pack: its name and its nodes in the manifest's order,
// which is the order of the ABI's node indexes.
type server struct {
	name  string
	ids   []string
	nodes []Node
}

// newServer checks that p's manifest names the pack and that its nodes and
// p.Nodes are the same set.
func newServer(p *Pack) (*server, error) {
	if p == nil {
		return nil, fmt.Errorf("no pack")
	}
	m, err := nodepack.ReadManifest(p.Manifest)
	if err != nil {
		return nil, err
	}
	s := &server{name: m.Name}
	seen := make(map[string]bool, len(m.Nodes))
	for i, n := range m.Nodes {
		if n.TypeID == "" {
			return nil, fmt.Errorf("manifest node %d has no typeId", i)
		}
		if seen[n.TypeID] {
			return nil, fmt.Errorf("manifest lists node %q twice", n.TypeID)
		}
		seen[n.TypeID] = true
		fn, ok := p.Nodes[n.TypeID]
		if !ok || fn == nil {
			return nil, fmt.Errorf("manifest node %q has no handler in Pack.Nodes", n.TypeID)
		}
		s.ids = append(s.ids, n.TypeID)
		s.nodes = append(s.nodes, fn)
	}
	for id := range p.Nodes {
		if !seen[id] {
			return nil, fmt.Errorf("Pack.Nodes has %q, which the manifest does not list", id)
		}
	}
	return s, nil
}

// mustServer is newServer for Serve: a pack that does not hold together
// is a programming error, which fails the module's initialization and so
// the host's load of it, with the reason.
func mustServer(p *Pack) *server {
	s, err := newServer(p)
	if err != nil {
		panic("wasmpack: invalid pack: " + err.Error())
	}
	return s
}

// nodeID returns the typeId of the node at index i.
func (s *server) nodeID(i int32) (string, bool) {
	if i < 0 || int(i) >= len(s.ids) {
		return "", false
	}
	return s.ids[i], true
}
