// Package nodepack is what the two pack SDKs, sdk/pack for a process and
// sdk/wasmpack for a WebAssembly module, share: the reading of the
// embedded manifest and the family clients of a node's Ctx. It depends on
// sdk/wop and the family clients alone, so that it builds for wasip1.
package nodepack

import (
	"encoding/json"
	"fmt"

	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/strictjson"
	"github.com/wophost/wophost/sdk/wop"
)

// Manifest is what the SDKs read of a pack.json: its name and its nodes'
// typeIds, in the file's order.
type Manifest struct {
	Name  string `json:"name"`
	Nodes []struct {
		TypeID string `json:"typeId"`
	} `json:"nodes"`
}

// ReadManifest decodes data, refusing a manifest with no name.
func ReadManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("manifest is not valid JSON: %w", err)
	}
	if m.Name == "" {
		return nil, fmt.Errorf("manifest has no name")
	}
	return &m, nil
}

// Typed adapts fn, a node over a typed input, to a node over raw JSON
// for a Ctx of type C: the input is read strictly (strictjson), a refusal
// a validation_error naming the member.
func Typed[C, In, Out any](fn func(ctx C, in *In) (Out, error)) func(C, json.RawMessage) (any, error) {
	return func(ctx C, input json.RawMessage) (any, error) {
		in := new(In)
		if err := strictjson.Decode(input, in, "input"); err != nil {
			return nil, err
		}
		return fn(ctx, in)
	}
}

// Clients are the core families' clients a node gets: each is nil unless
// its family is advertised.
type Clients struct {
	AIEnvelope    *aienvelope.Client
	PromptLibrary *promptlibrary.Client
	AgentRuntime  *agentruntime.Client
	MCP           *mcp.Client
}

// NewClients returns the clients calling through host for the families
// advertised, family to facets.
func NewClients(host wop.Caller, advertised map[string]map[string]json.RawMessage) Clients {
	var c Clients
	if f, ok := advertised[aienvelope.Family]; ok {
		c.AIEnvelope = aienvelope.NewClient(host, f)
	}
	if f, ok := advertised[promptlibrary.Family]; ok {
		c.PromptLibrary = promptlibrary.NewClient(host, f)
	}
	if f, ok := advertised[agentruntime.Family]; ok {
		c.AgentRuntime = agentruntime.NewClient(host, f)
	}
	if f, ok := advertised[mcp.Family]; ok {
		c.MCP = mcp.NewClient(host, f)
	}
	return c
}
