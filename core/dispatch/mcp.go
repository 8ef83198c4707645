package dispatch

import (
	"context"
	"slices"
	"strconv"

	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/strictjson"
	"github.com/wophost/wophost/sdk/wop"
)

// Agent is the agent a plugin calls on behalf of, with the manifest the
// host holds for its digest.
type Agent struct {
	AgentCaller
	Manifest *agentruntime.Manifest
}

// MCPPolicy is the host's side of mcp for agents (docs/contract.md §5.3):
//
//   - An agent's callTool must name a server and tool its manifest's
//     toolAllowlist lists; its other calls must name a server some
//     allowlist entry names.
//   - The plugin that runs agents calls mcp only on behalf of one, so that
//     no call of it escapes an allowlist by leaving out the claim.
//
// Refusals are capability_not_declared. Other callers pass unchanged.
type MCPPolicy struct{}

// Call implements Policy.
func (MCPPolicy) Call(_ context.Context, caller Caller, _ wop.CallContext, method string, payload []byte, next func([]byte) ([]byte, error)) ([]byte, error) {
	agent := caller.Agent
	if agent == nil && !caller.RunsAgents {
		// The common case, a pack's or the operator's call: nothing to
		// check, nothing to build.
		return next(payload)
	}
	capability := "host." + mcp.Family + "." + method
	refuse := func(format string, args ...any) *wop.Error {
		return wop.Errorf(wop.CodeCapabilityNotDeclared, format, args...).WithCapability(capability)
	}
	if agent == nil {
		return nil, refuse("%s runs agents and may call mcp only on behalf of one (Caller agent:<instance>@<digest>)", caller.Name)
	}
	// The allowlist is decided on the members the plugin will read: a
	// spelling it could read differently is refused.
	members, err := strictjson.Members(payload, method+" request", "serverId", "name")
	if err != nil {
		return nil, wop.AsError(err).WithCapability(capability)
	}
	var req struct {
		ServerID string `json:"serverId"`
		Name     string `json:"name"`
	}
	for name, dst := range map[string]*string{"serverId": &req.ServerID, "name": &req.Name} {
		if v := members[name]; v != nil && string(v) != "null" {
			if err := strictjson.Decode(v, dst, method+" request member "+strconv.Quote(name)); err != nil {
				return nil, wop.AsError(err).WithCapability(capability)
			}
		}
	}
	m := agent.Manifest
	details := map[string]string{"agentInstanceId": agent.InstanceID, "manifestId": m.ID, "manifestDigest": agent.Digest, "serverId": req.ServerID}
	if method == mcp.MethodCallTool {
		details["name"] = req.Name
		if !m.Allows(req.ServerID, req.Name) {
			return nil, refuse("agent %s (%s) may not call %s/%s: it is not in the manifest's toolAllowlist", agent.InstanceID, m.ID, req.ServerID, req.Name).WithDetails(details)
		}
	} else if !slices.Contains(m.MCPServers(), req.ServerID) {
		return nil, refuse("agent %s (%s) may not reach MCP server %q: no toolAllowlist entry names it", agent.InstanceID, m.ID, req.ServerID).WithDetails(details)
	}
	return next(payload)
}
