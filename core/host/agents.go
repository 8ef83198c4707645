package host

import (
	"context"
	"encoding/json"
	"time"

	"github.com/wophost/wophost/core/agents"
	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/wop"
)

// manifestRuntimeFacet is the host's agents.manifestRuntime record: the
// registry is host-wide and handoff targets are checked at install.
const manifestRuntimeFacet = `{"handoffValidation":true,"installScope":"host"}`

// installCallTimeout bounds each host-service call an install makes.
const installCallTimeout = 30 * time.Second

// setUpAgents creates the agent registry, advertises agents.manifestRuntime
// whenever agentRuntime is advertised (which itself needs aiEnvelope), and
// puts the spawn policy in front of the agentRuntime plugin and the
// agents' toolAllowlists in front of the mcp plugin.
func (h *Host) setUpAgents() {
	h.agents = agents.New()
	h.agentCheck = &agents.Checker{ResolvePrompt: h.resolvePrompt, MCPServers: h.mcpServers}
	h.reg.Provide(registry.Family{
		Name: wop.FamilyAgents, Status: "stable", Since: "2.0", Witness: "witnessable-gated",
		Needs:  []string{wop.FamilyAgentRuntime},
		Facets: map[string]json.RawMessage{agentruntime.FacetManifestRuntime: json.RawMessage(manifestRuntimeFacet)},
	})
	h.router.SetPolicy(wop.FamilyAgentRuntime, dispatch.NewAgentPolicy(h.agents, h.agentCheck))
	h.router.SetPolicy(wop.FamilyMCP, dispatch.MCPPolicy{})
}

// Agents lists the agent registry, sorted by id.
func (h *Host) Agents() []*agents.Entry { return h.agents.List() }

// resolvePrompt fetches a pinned prompt through the router, as the
// operator would, so that the host's prompt policy checks the answer.
func (h *Host) resolvePrompt(ctx context.Context, ref string) (agents.ResolvedPrompt, error) {
	return h.getPinnedPrompt(ctx, ref, "host (agent install)", "host.agents.install")
}

// getPinnedPrompt is resolvePrompt for the host's own checks, made as
// caller in a run of type typeID, which logs and traces name.
func (h *Host) getPinnedPrompt(ctx context.Context, ref, caller, typeID string) (agents.ResolvedPrompt, error) {
	ctx, cancel := context.WithTimeout(ctx, installCallTimeout)
	defer cancel()
	payload, err := json.Marshal(promptlibrary.GetRequest{PromptID: ref})
	if err != nil {
		return agents.ResolvedPrompt{}, err
	}
	run := &dispatch.Run{ID: dispatch.NewID("run"), NodeID: dispatch.NewID("node"), TypeID: typeID}
	run.Deadline, _ = ctx.Deadline()
	out, err := h.router.Call(ctx, dispatch.Caller{Name: caller}, wop.FamilyPromptLibrary, promptlibrary.MethodGet, payload, run.CallContext("host"))
	if err != nil {
		return agents.ResolvedPrompt{}, err
	}
	var p promptlibrary.Prompt
	if err := json.Unmarshal(out, &p); err != nil {
		return agents.ResolvedPrompt{}, wop.Errorf(wop.CodeUpstreamUnavailable, "promptLibrary.get %s: %v", ref, err)
	}
	return agents.ResolvedPrompt{Ref: ref, Name: p.Name, Version: p.Version, Digest: p.Digest}, nil
}

// mcpServers returns the servers the mcp family reaches while its client
// facet is advertised: the plugin lists them in the family's details.
func (h *Host) mcpServers() ([]string, bool) {
	if !h.reg.Has(wop.FamilyMCP, mcp.FacetClient) {
		return nil, false
	}
	_, fam, _ := h.reg.Lookup(wop.FamilyMCP)
	var details struct {
		Servers []string `json:"servers"`
	}
	if len(fam.Details) == 0 || json.Unmarshal(fam.Details, &details) != nil {
		return nil, true
	}
	return details.Servers, true
}
