package plugin

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"

	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/internal/procutil"
	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// Serve serves p to the host and returns when the host stops the plugin.
// It is the whole of a plugin's main.
func Serve(p *Plugin) {
	if err := p.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "invalid plugin definition: %v\n", err)
		os.Exit(1)
	}
	name := p.Name
	if n := os.Getenv(wire.EnvPluginName); n != "" {
		name = n
	}
	logger := procutil.Logger(name)
	maxBytes := wire.MaxMessageBytesFromEnv()
	tp, flush := procutil.Tracing(name, logger)
	defer flush()
	procutil.WatchParent(logger, p.Shutdown)
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: wire.Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{
			wire.ProtocolVersion: {
				wire.KindCapability: &wire.CapabilityPlugin{
					NewServer: func(broker *goplugin.GRPCBroker) wophostv1.CapabilityServer {
						return newServer(p, broker, logger, maxBytes, tp.Tracer(tracerName))
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
	if p.Shutdown != nil {
		p.Shutdown()
	}
}

// tracerName is the instrumentation scope of the plugin SDK's spans.
const tracerName = "github.com/wophost/wophost/sdk/plugin"

// Validate reports why p cannot be served, or nil: what Serve checks
// before it starts, and exits on. A plugin's own test calls it to see its
// definition accepted (or refused) without a process exiting.
func (p *Plugin) Validate() error {
	if p.Name == "" {
		return fmt.Errorf("plugin name is empty")
	}
	seen := map[string]bool{}
	for i, f := range p.Families {
		if f == nil || f.Name == "" {
			return fmt.Errorf("family %d has no name", i)
		}
		if seen[f.Name] {
			return fmt.Errorf("family %q is listed twice", f.Name)
		}
		seen[f.Name] = true
		if len(f.Methods) == 0 {
			return fmt.Errorf("family %q has no methods", f.Name)
		}
		if err := wop.CheckFamilyRecord(f.Status, f.Since, f.Until, f.Witness); err != nil {
			return fmt.Errorf("family %q: %w", f.Name, err)
		}
		if err := f.checkCodes(); err != nil {
			return err
		}
		if err := f.checkPure(); err != nil {
			return err
		}
		methods := slices.Sorted(maps.Keys(f.Methods))
		if err := admission.CheckFacetRules(f.Name, methods, f.FacetRules); err != nil {
			return fmt.Errorf("family %q: %w", f.Name, err)
		}
	}
	if vs := p.ConfigSchema.CheckDeclarations(); len(vs) > 0 {
		return fmt.Errorf("config schema attribute %q: %w", strings.Join(vs[0].Path, "."), vs[0].Err)
	}
	return nil
}

// GRPCPlugin returns what Serve serves for p, for a test that runs p inside
// its own process: plugintest.StartInProcess hands it to go-plugin's
// in-process connection, so the conformance kit runs against p with no
// binary. logger receives the plugin's log; the message limit is the
// protocol's default. Call Validate first: GRPCPlugin does not.
func (p *Plugin) GRPCPlugin(logger hclog.Logger) goplugin.Plugin {
	return &wire.CapabilityPlugin{
		NewServer: func(broker *goplugin.GRPCBroker) wophostv1.CapabilityServer {
			return newServer(p, broker, logger, wire.DefaultMaxMessageBytes, noop.NewTracerProvider().Tracer(tracerName))
		},
	}
}
