package wire

import (
	"context"
	"errors"
	"runtime"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
)

// CapabilityPlugin is the go-plugin side of a capability plugin. On the
// plugin side NewServer builds the service; on the host side GRPCClient
// returns a *CapabilityConn.
type CapabilityPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	NewServer func(broker *goplugin.GRPCBroker) wophostv1.CapabilityServer
}

var _ goplugin.GRPCPlugin = (*CapabilityPlugin)(nil)

// GRPCServer registers the Capability service.
func (p *CapabilityPlugin) GRPCServer(broker *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.NewServer == nil {
		return errors.New("capability plugin has no server")
	}
	wophostv1.RegisterCapabilityServer(s, p.NewServer(broker))
	return nil
}

// GRPCClient returns a *CapabilityConn.
func (p *CapabilityPlugin) GRPCClient(ctx context.Context, broker *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &CapabilityConn{Client: wophostv1.NewCapabilityClient(c), Health: healthpb.NewHealthClient(c), Broker: broker, Exited: ctx}, nil
}

// HealthService is the service name a plugin's health check answers
// for: go-plugin's.
const HealthService = "plugin"

// CapabilityConn is the host's connection to one capability plugin.
type CapabilityConn struct {
	Client wophostv1.CapabilityClient
	// Health is the plugin's grpc.health.v1 service, which answers
	// SERVING for the service name HealthService while the plugin is
	// alive.
	Health healthpb.HealthClient
	Broker *goplugin.GRPCBroker
	// Exited is cancelled when the plugin process exits.
	Exited context.Context
}

// PackPlugin is the go-plugin side of a node pack.
type PackPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	NewServer func(broker *goplugin.GRPCBroker) wophostv1.PackServer
}

var _ goplugin.GRPCPlugin = (*PackPlugin)(nil)

// GRPCServer registers the Pack service.
func (p *PackPlugin) GRPCServer(broker *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.NewServer == nil {
		return errors.New("pack has no server")
	}
	wophostv1.RegisterPackServer(s, p.NewServer(broker))
	return nil
}

// GRPCClient returns a *PackConn.
func (p *PackPlugin) GRPCClient(ctx context.Context, broker *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &PackConn{Client: wophostv1.NewPackClient(c), Health: healthpb.NewHealthClient(c), Broker: broker, Exited: ctx}, nil
}

// PackConn is the host's connection to one pack process.
type PackConn struct {
	Client wophostv1.PackClient
	// Health is the pack's grpc.health.v1 service, which go-plugin serves
	// in every process (packs too) and which answers SERVING for the
	// service name HealthService while the process is alive.
	Health healthpb.HealthClient
	Broker *goplugin.GRPCBroker
	// Exited is cancelled when the pack process exits.
	Exited context.Context
}

// hostPluginSet is the plugin set the host offers, keyed by protocol version.
func hostPluginSet() map[int]goplugin.PluginSet {
	return map[int]goplugin.PluginSet{
		ProtocolVersion: {
			KindCapability: &CapabilityPlugin{},
			KindPack:       &PackPlugin{},
		},
	}
}

// Flow-control windows of every wophost connection. Fixed windows turn off
// gRPC's bandwidth-delay estimator, whose PING round trip on each response
// cost a local call about a quarter of its latency: on a unix socket between
// two processes there is no bandwidth to discover. The windows bound how
// much a peer may send ahead of the reader, not what is allocated.
const (
	streamWindow = 1 << 20
	connWindow   = 4 << 20
)

// ServerOptions are the gRPC server options both sides use: message size
// limits raised to maxBytes (the gRPC server default is 4 MiB), fixed
// flow-control windows, and a pool of stream workers (see streamWorkers).
func ServerOptions(maxBytes int) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxBytes), grpc.MaxSendMsgSize(maxBytes),
		grpc.StaticStreamWindowSize(streamWindow), grpc.StaticConnWindowSize(connWindow),
		grpc.NumStreamWorkers(streamWorkers()),
	}
}

// streamWorkers is how many goroutines a server keeps to serve calls. By
// default gRPC starts a goroutine for every call, whose stack then grows
// (a copy each time) to what the handler needs: on a call of a few
// hundred microseconds that is a measurable share of its CPU. A worker
// keeps its grown stack from one call to the next. A call that finds every
// worker busy still gets a goroutine of its own, so the pool bounds
// nothing. A call waits more than it computes (on the plugin's provider,
// on the host's next hop), so more calls are in flight than processors
// run: at least 16 workers, and four per processor past that. An idle
// worker costs a parked goroutine's small stack.
func streamWorkers() uint32 {
	return uint32(max(16, 4*runtime.GOMAXPROCS(0)))
}

// dialOptions are the gRPC dial options both sides use for the same limit
// and windows. A call refused for the size of a message fails with the
// envelope of the message at fault: validation_error for the request,
// upstream_unavailable for the result.
func dialOptions(maxBytes int) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxBytes), grpc.MaxCallSendMsgSize(maxBytes)),
		grpc.WithChainUnaryInterceptor(sizeErrors(maxBytes)),
		grpc.WithStaticStreamWindowSize(streamWindow), grpc.WithStaticConnWindowSize(connWindow),
	}
}

// ServeHostServices serves impl on a new broker id and returns the id to
// pass to the other side. The listener lives as long as the broker.
func ServeHostServices(broker *goplugin.GRPCBroker, impl wophostv1.HostServicesServer, maxBytes int) uint32 {
	id := broker.NextId()
	go broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(append(opts, ServerOptions(maxBytes)...)...)
		wophostv1.RegisterHostServicesServer(s, impl)
		return s
	})
	return id
}
