// Package hostservices is the HostServices gRPC service the host serves to
// every pack and capability plugin through the go-plugin broker. It binds
// each connection to the identity of the process it was served to, so a
// caller cannot claim to be someone else.
package hostservices

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/dispatch"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wire"
	"github.com/wophost/wophost/sdk/wop"
)

// Server serves HostServices to one process.
type Server struct {
	router *dispatch.Router
	runs   *dispatch.Runs
	logger hclog.Logger
	// pack is set when the process is a node pack: calls come from node
	// code and are checked against the running node's declarations.
	pack string
	// plugin is set when the process is a capability plugin: calls are
	// checked against the families the plugin needs or uses.
	plugin        string
	pluginAllowed func(family, facet string) bool
}

var _ wophostv1.HostServicesServer = (*Server)(nil)

// ForPack returns the HostServices served to the named pack.
func ForPack(router *dispatch.Router, runs *dispatch.Runs, logger hclog.Logger, pack string) *Server {
	return &Server{router: router, runs: runs, logger: logger, pack: pack}
}

// ForPlugin returns the HostServices served to a capability plugin that may
// call the families allowed reports.
func ForPlugin(router *dispatch.Router, runs *dispatch.Runs, logger hclog.Logger, plugin string, allowed func(family, facet string) bool) *Server {
	return &Server{router: router, runs: runs, logger: logger, plugin: plugin, pluginAllowed: allowed}
}

// Call implements HostServices.Call.
func (s *Server) Call(ctx context.Context, req *wophostv1.CallRequest) (*wophostv1.CallResponse, error) {
	claimed := wire.CallContextFromProto(req.GetCall())
	run, ok := s.runs.Get(claimed.RunID)
	if !ok {
		return nil, wire.ToStatus(wop.Errorf(wop.CodeNotFound, "no node run %q is in flight", claimed.RunID).
			WithCapability("host." + req.GetFamily() + "." + req.GetMethod()))
	}
	var caller dispatch.Caller
	var call wop.CallContext
	if s.pack != "" {
		if run.Pack != s.pack {
			return nil, wire.ToStatus(wop.Errorf(wop.CodeCapabilityNotDeclared, "run %s does not belong to pack %s", run.ID, s.pack))
		}
		caller = dispatch.Caller{Name: "pack " + s.pack + " node " + run.TypeID, Allowed: run.Allowed}
		call = run.CallContext("pack:" + s.pack)
	} else {
		caller = dispatch.Caller{Name: "plugin " + s.plugin, Allowed: s.pluginAllowed}
		call = run.CallContext("plugin:" + s.plugin)
		call.Depth = claimed.Depth + 1
		// A plugin may narrow the deadline (its own budget) but never
		// extend the run's.
		if !claimed.Deadline.IsZero() && (call.Deadline.IsZero() || claimed.Deadline.Before(call.Deadline)) {
			call.Deadline = claimed.Deadline
		}
	}
	if claimed.IdempotencyKey != "" {
		call.IdempotencyKey = claimed.IdempotencyKey
	}
	if claimed.Traceparent != "" {
		call.Traceparent = claimed.Traceparent
	}
	out, err := s.router.Call(ctx, caller, req.GetFamily(), req.GetMethod(), req.GetPayload(), call)
	if err != nil {
		s.logger.Debug("host-service call refused or failed", "run_id", run.ID, "node_id", run.NodeID,
			"family", req.GetFamily(), "method", req.GetMethod(), "caller", caller.Name, "code", wop.CodeOf(err))
		return nil, wire.ToStatus(err)
	}
	return &wophostv1.CallResponse{Result: out}, nil
}
