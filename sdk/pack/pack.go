// Package pack is what a pack author imports to write a node pack: a binary
// that serves node types to the wophost host. Node code reaches host
// services through Ctx, which exposes a family only while the host
// advertises it.
package pack

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/internal/nodepack"
	"github.com/wophost/wophost/sdk/internal/wire"
	"github.com/wophost/wophost/sdk/wop"
)

// Pack is a node pack.
type Pack struct {
	// Manifest is the pack.json the binary was built with, usually through
	// //go:embed. The host refuses the pack when it differs from the file
	// beside the binary. Schema files are not embedded: the host reads
	// them from the pack directory.
	Manifest []byte
	// Nodes maps each typeId to its implementation.
	Nodes map[string]Node
}

// Node runs one node. input has already been validated by the host
// against the schema file the node's inputSchemaRef names. The result is marshalled to JSON; errors should
// be *wop.Error values (others reach the host as "internal"). When the
// host runs the pack contained (WOPHOST_SANDBOX set), an error that is no
// *wop.Error and holds a refused operation's EPERM or EACCES reaches it
// as sandbox_capability_denied, naming the runtime requirement that would
// allow the operation.
type Node func(ctx *Ctx, input json.RawMessage) (any, error)

// TypedNode adapts a function over a typed input to a Node. Unknown fields
// are refused with a validation_error naming them.
func TypedNode[In, Out any](fn func(ctx *Ctx, in *In) (Out, error)) Node {
	return nodepack.Typed(fn)
}

// Ctx is what a running node sees: a context.Context that ends with the
// node's deadline, and one field per core family. A family's field is nil
// unless the host advertises it; its methods are safe on nil and then fail
// with capability_not_provided.
type Ctx struct {
	context.Context

	AIEnvelope    *aienvelope.Client
	PromptLibrary *promptlibrary.Client
	AgentRuntime  *agentruntime.Client
	MCP           *mcp.Client

	// Run identifies this node run. Its Token is the run's secret: every
	// host-service call made with this Ctx, or a context derived from it,
	// carries it, and the host refuses a call without it. Node code never
	// needs to handle it, and it prints redacted.
	Run wop.CallContext
	// Logger writes to the host's log with the run and node ids attached.
	Logger hclog.Logger

	host       wop.Caller
	advertised map[string]map[string]json.RawMessage
}

// Call makes a host-service call to any family, vendor families included:
// req is marshalled to JSON and the result unmarshalled into res (a
// pointer, *json.RawMessage for the raw bytes, or nil). The host decides
// every refusal, also for a family it does not advertise, so an
// undeclared call is capability_not_declared whether or not the family is
// served.
func (c *Ctx) Call(family, method string, req, res any) error {
	return c.host.Call(c, family, method, req, res)
}

// Advertised reports whether the host advertises family right now.
func (c *Ctx) Advertised(family string) bool {
	_, ok := c.advertised[family]
	return ok
}

// Facet returns the advertised settings of family.facet and whether the
// facet is advertised.
func (c *Ctx) Facet(family, facet string) (json.RawMessage, bool) {
	v, ok := c.advertised[family][facet]
	return v, ok
}

// NewCtx returns the Ctx a node sees, for a node's unit test: host answers
// the node's host-service calls (a fake of the test's own, or nil for
// none), and advertised is the advertisement the node runs under, family
// to facets ({"aiEnvelope": {"await": true}}); a family absent from it
// leaves its client nil, as under the host. The Ctx's Run is empty and its
// Logger discards.
func NewCtx(ctx context.Context, host wop.Caller, advertised map[string]map[string]json.RawMessage) *Ctx {
	if host == nil {
		host = wire.NoHost{}
	}
	cp := make(map[string]map[string]json.RawMessage, len(advertised))
	for fam, f := range advertised {
		if f == nil {
			// A pack always knows the advertisement: no facets is an
			// empty record, never "unknown" (which NewClient reads as
			// "let the host check"). Execute never builds a nil one.
			f = map[string]json.RawMessage{}
		}
		cp[fam] = f
	}
	return newCtx(ctx, host, wop.CallContext{}, cp, hclog.NewNullLogger())
}

func newCtx(ctx context.Context, host wop.Caller, call wop.CallContext, advertised map[string]map[string]json.RawMessage, logger hclog.Logger) *Ctx {
	c := &Ctx{
		Context:    wop.WithCallContext(ctx, call),
		Run:        call,
		Logger:     logger,
		host:       host,
		advertised: advertised,
	}
	cl := nodepack.NewClients(host, advertised)
	c.AIEnvelope, c.PromptLibrary, c.AgentRuntime, c.MCP = cl.AIEnvelope, cl.PromptLibrary, cl.AgentRuntime, cl.MCP
	return c
}
