package pack

import (
	"fmt"
	"os"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/wophost/wophost/sdk/internal/direct"
	"github.com/wophost/wophost/sdk/internal/nodepack"
	"github.com/wophost/wophost/sdk/internal/procutil"
	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
)

// Serve serves p to the host and returns when the host stops the pack. It
// is the whole of a pack's main.
func Serve(p *Pack) {
	name, err := p.validate()
	if err != nil {
		fmt.Fprintf(os.Stderr, "invalid pack definition: %v\n", err)
		os.Exit(1)
	}
	logger := procutil.Logger(name)
	maxBytes := wire.MaxMessageBytesFromEnv()
	tp, flush := procutil.Tracing(name, logger)
	defer flush()
	procutil.WatchParent(logger, nil)
	isContained := contained(os.LookupEnv)
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: wire.Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{
			wire.ProtocolVersion: {
				wire.KindPack: &wire.PackPlugin{
					NewServer: func(broker *goplugin.GRPCBroker) wophostv1.PackServer {
						return &server{p: p, broker: broker, logger: logger, maxBytes: maxBytes, tracer: tp.Tracer(tracerName), hosts: map[uint32]*wire.HostCaller{}, direct: direct.NewPool(maxBytes), contained: isContained}
					},
				},
			},
		},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, wire.ServerOptions(maxBytes)...)...)
		},
		TLSProvider: wire.ServerTLS,
		Logger:      logger,
	})
}

// tracerName is the instrumentation scope of the pack SDK's spans.
const tracerName = "github.com/wophost/wophost/sdk/pack"

// validate checks that the embedded manifest names every node the binary
// serves, so a mismatch fails at build-and-run time rather than at dispatch.
func (p *Pack) validate() (string, error) {
	m, err := nodepack.ReadManifest(p.Manifest)
	if err != nil {
		return "", err
	}
	declared := map[string]bool{}
	for _, n := range m.Nodes {
		declared[n.TypeID] = true
	}
	for id := range p.Nodes {
		if !declared[id] {
			return "", fmt.Errorf("node %q is not in the manifest", id)
		}
	}
	return m.Name, nil
}
