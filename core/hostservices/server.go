// Package hostservices is the HostServices gRPC service the host serves to
// every pack and capability plugin through the go-plugin broker. It binds
// each connection to the identity of the process it was served to, so a
// caller cannot claim to be someone else, and each call to the run whose
// token it carries, so a caller cannot act in a run it was not given.
package hostservices

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/hostwire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// Server serves HostServices to one process.
type Server struct {
	// target is where calls go; a reload may hand a running plugin to the
	// next host, which rebinds it (Rebind).
	target atomic.Pointer[target]
	runs   *dispatch.Runs
	logger hclog.Logger
	// pack is set when the process is a node pack: calls come from node
	// code and are checked against the running node's declarations.
	pack string
	// plugin is set when the process is a capability plugin: calls are
	// checked against the families the plugin needs or uses.
	plugin        string
	pluginAllowed func(family, facet string) bool
	// runsAgents is set only for the plugin serving agentRuntime: it may
	// call on behalf of agents. Another plugin that claims to call for an
	// agent is refused.
	runsAgents bool
	// callerName is the Caller of the call context every call gets,
	// "pack:<name>" or "plugin:<name>", built once rather than per call.
	callerName string
}

// target is the host a Server's calls go to.
type target struct {
	router *dispatch.Router
	// agentManifest finds the manifest an agent caller names by digest.
	agentManifest func(digest string) (*agentruntime.Manifest, bool)
}

var _ wophostv1.HostServicesServer = (*Server)(nil)

// ForPack returns the HostServices served to the named pack.
func ForPack(router *dispatch.Router, runs *dispatch.Runs, logger hclog.Logger, pack string) *Server {
	s := &Server{runs: runs, logger: logger, pack: pack, callerName: wop.PackCaller(pack)}
	s.target.Store(&target{router: router})
	return s
}

// ForPlugin returns the HostServices served to a capability plugin that may
// call the families allowed reports.
func ForPlugin(router *dispatch.Router, runs *dispatch.Runs, logger hclog.Logger, plugin string, allowed func(family, facet string) bool) *Server {
	s := &Server{runs: runs, logger: logger, plugin: plugin, pluginAllowed: allowed, callerName: wop.PluginCaller(plugin)}
	s.target.Store(&target{router: router})
	return s
}

// ForAgents lets the plugin make calls on behalf of agents: a call whose
// claimed Caller is "agent:<agentInstanceId>@<manifestDigest>" is checked
// against the manifest manifest(digest) returns (docs/contract.md §5.3). Only the
// plugin serving agentRuntime gets it. It returns s.
func (s *Server) ForAgents(manifest func(digest string) (*agentruntime.Manifest, bool)) *Server {
	s.runsAgents = true
	s.target.Store(&target{router: s.target.Load().router, agentManifest: manifest})
	return s
}

// Rebind sends the process's calls from now on to router, with agent
// manifests found by manifest (ignored unless the process runs agents).
// A reload calls it when the next host takes over a running plugin; calls
// already in flight finish where they started.
func (s *Server) Rebind(router *dispatch.Router, manifest func(digest string) (*agentruntime.Manifest, bool)) {
	t := &target{router: router}
	if s.runsAgents {
		t.agentManifest = manifest
	}
	s.target.Store(t)
}

// Call implements HostServices.Call.
func (s *Server) Call(ctx context.Context, req *wophostv1.CallRequest) (*wophostv1.CallResponse, error) {
	claimed := hostwire.CallContextFromProto(req.GetCall())
	run, ok := s.runs.Get(claimed.RunID)
	if !ok {
		return nil, hostwire.ToStatus(wop.Errorf(wop.CodeNotFound, "no node run %q is in flight", claimed.RunID).
			WithCapability("host." + req.GetFamily() + "." + req.GetMethod()))
	}
	if err := s.checkToken(run, claimed, req.GetFamily(), req.GetMethod()); err != nil {
		return nil, hostwire.ToStatus(err)
	}
	tgt := s.target.Load()
	var caller dispatch.Caller
	var call wop.CallContext
	if s.pack != "" {
		if run.Pack != s.pack {
			return nil, hostwire.ToStatus(wop.Errorf(wop.CodeCapabilityNotDeclared, "run %s does not belong to pack %s", run.ID, s.pack))
		}
		caller = dispatch.Caller{Name: admission.NodeCaller(s.pack, run.TypeID), Allowed: run.Allowed}
		call = run.CallContext(s.callerName)
	} else {
		caller = dispatch.Caller{Name: admission.PluginCaller(s.plugin), Allowed: s.pluginAllowed}
		call = run.CallContext(s.callerName)
		if err := s.checkAgent(tgt, claimed.Caller, req.GetFamily(), req.GetMethod(), &caller); err != nil {
			s.logger.Debug("host-service call refused", "run_id", run.ID, "node_id", run.NodeID,
				"family", req.GetFamily(), "method", req.GetMethod(), "caller", claimed.Caller, "code", wop.CodeOf(err))
			return nil, hostwire.ToStatus(err)
		}
		call.Depth = claimed.Depth + 1
		// A plugin may narrow the deadline (its own budget) but never
		// extend the run's.
		if !claimed.Deadline.IsZero() && (call.Deadline.IsZero() || claimed.Deadline.Before(call.Deadline)) {
			call.Deadline = claimed.Deadline
		}
	}
	// A run whose caller set no deadline holds each call to the host's
	// call_timeout: a hung plugin keeps one call that long, not the run.
	call.Deadline = run.CallDeadline(call.Deadline, time.Now())
	if claimed.IdempotencyKey != "" {
		call.IdempotencyKey = claimed.IdempotencyKey
	}
	if claimed.Traceparent != "" {
		call.Traceparent = claimed.Traceparent
	}
	out, err := tgt.router.Call(ctx, caller, req.GetFamily(), req.GetMethod(), req.GetPayload(), call)
	if err != nil {
		s.logger.Debug("host-service call refused or failed", "run_id", run.ID, "node_id", run.NodeID,
			"family", req.GetFamily(), "method", req.GetMethod(), "caller", caller.Name, "code", wop.CodeOf(err))
		return nil, hostwire.ToStatus(err)
	}
	return &wophostv1.CallResponse{Result: out}, nil
}

// checkToken refuses a call that names run without carrying its token.
// The run id is no secret (it is in logs, run records and API answers),
// so without this a node could act as a sibling node of its pack that is
// in flight, with that node's declared families, or a plugin as any run,
// by naming its id. The token is compared in constant time and never
// logged. The refusal is capability_not_declared, the contract's code for
// a call the caller may not make, whether the token is missing or wrong;
// the message says which, and nothing of the run beyond the id the caller
// named.
func (s *Server) checkToken(run *dispatch.Run, claimed wop.CallContext, family, method string) error {
	if run.Binds(claimed.Token) {
		return nil
	}
	who := "pack " + s.pack
	if s.pack == "" {
		who = "plugin " + s.plugin
	}
	why := "a run token that is not the run's"
	if claimed.Token.IsZero() {
		why = "no run token"
	}
	// A forged or lost token is never a node's ordinary mistake: the SDKs
	// carry it. Warn, so that the operator sees a pack or plugin that
	// tries, or one built on an SDK that drops the token.
	s.logger.Warn("host-service call refused: it names a run without that run's token",
		"run_id", run.ID, "caller", who, "family", family, "method", method, "token", claimed.Token)
	return wop.Errorf(wop.CodeCapabilityNotDeclared, "%s may not act in run %s: the call carries %s (the run token the host gave with the run's call context)", who, run.ID, why).
		WithCapability("host." + family + "." + method)
}

// checkAgent binds a call its plugin makes for an agent to the agent's
// manifest, which the router's mcp policy holds the call to. A claim from
// a plugin that does not run agents, a malformed claim or an unknown
// manifest digest is refused; a call that claims no agent passes.
func (s *Server) checkAgent(tgt *target, claimed, family, method string, caller *dispatch.Caller) error {
	caller.RunsAgents = s.runsAgents
	agent, isAgent, err := dispatch.ParseAgentCaller(claimed)
	refuse := func(format string, args ...any) *wop.Error {
		return wop.Errorf(wop.CodeCapabilityNotDeclared, format, args...).WithCapability("host." + family + "." + method)
	}
	switch {
	case !isAgent:
		return nil
	case !s.runsAgents || tgt.agentManifest == nil:
		return refuse("plugin %s does not run agents and may not call as %q", s.plugin, claimed)
	case err != nil:
		return refuse("%v", err)
	}
	m, ok := tgt.agentManifest(agent.Digest)
	if !ok {
		return refuse("agent %s runs a manifest (%s) the host did not install or let through spawn", agent.InstanceID, agent.Digest)
	}
	caller.Name = admission.PluginCaller(s.plugin) + " agent " + agent.InstanceID + " (" + m.ID + ")"
	caller.Agent = &dispatch.Agent{AgentCaller: agent, Manifest: m}
	return nil
}
