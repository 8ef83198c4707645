package plugin

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// tokenHost records the run token of every host-service call.
type tokenHost struct {
	mu     sync.Mutex
	tokens []string
}

func (h *tokenHost) Call(_ context.Context, req *wophostv1.CallRequest) (*wophostv1.CallResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tokens = append(h.tokens, req.GetCall().GetRunToken())
	return &wophostv1.CallResponse{Result: []byte(`{}`)}, nil
}

// A plugin's callbacks on behalf of a run carry the token of the call
// that reached it, whichever caller it uses (Request.Host or the one
// Configure gave it) and also from a context it rebuilt from Request.Call
// for work of its own, as the agent runtime does: handler code never
// handles the token.
func TestCallbacksCarryTheRunToken(t *testing.T) {
	host := &tokenHost{}
	var configured wop.Caller
	p := &Plugin{
		Name: "tokens", Version: "1.0.0",
		Configure: func(_ context.Context, req *ConfigureRequest) error {
			configured = req.Host
			return nil
		},
		Families: []*Family{{
			Name: "test.tokens", Status: "stable", Since: "2.0", Uses: []string{"test.echo"},
			Methods: map[string]Handler{"call": func(ctx context.Context, r *Request) (any, error) {
				if err := r.Host.Call(ctx, "test.echo", "echo", map[string]any{}, nil); err != nil {
					return nil, err
				}
				if err := configured.Call(ctx, "test.echo", "echo", map[string]any{}, nil); err != nil {
					return nil, err
				}
				own, cancel := context.WithTimeout(wop.WithCallContext(context.Background(), r.Call), time.Minute)
				defer cancel()
				return nil, r.Host.Call(own, "test.echo", "echo", map[string]any{}, nil)
			}},
		}},
	}
	conn := inProcess(t, p, hclog.NewNullLogger())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := wire.ServeHostServices(conn.Broker, host, wire.DefaultMaxMessageBytes)
	if _, err := conn.Client.Configure(ctx, &wophostv1.ConfigureRequest{Config: []byte(`{}`), HostServicesBrokerId: id}); err != nil {
		t.Fatal(err)
	}
	call := wop.CallContext{RunID: "run_1", Caller: "pack:test", Depth: 1, Token: wop.NewRunToken("token-of-run-1")}
	if _, err := conn.Client.Invoke(ctx, &wophostv1.InvokeRequest{
		Family: "test.tokens", Method: "call", Payload: []byte(`{}`), Call: wire.CallContextToProto(call),
	}); err != nil {
		t.Fatal(wire.FromStatus(err))
	}
	host.mu.Lock()
	defer host.mu.Unlock()
	if len(host.tokens) != 3 {
		t.Fatalf("%d callbacks reached the host, want 3", len(host.tokens))
	}
	for i, tok := range host.tokens {
		if tok != "token-of-run-1" {
			t.Errorf("callback %d carried run token %q, want the run's", i, tok)
		}
	}
}

// connSignal is a gRPC stats handler that closes began when the first
// connection to its server begins.
type connSignal struct {
	once  sync.Once
	began chan struct{}
}

func (c *connSignal) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (c *connSignal) HandleRPC(context.Context, stats.RPCStats)                         {}
func (c *connSignal) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (c *connSignal) HandleConn(_ context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnBegin); ok {
		c.once.Do(func() { close(c.began) })
	}
}

// Configure connects to the host's services at once, before any call
// needs them: go-plugin's broker keeps the connection information the
// host sends for a few seconds only, and a plugin's first callback may
// come minutes later (a host that serves and idles).
func TestConfigureConnectsToHostServicesAtOnce(t *testing.T) {
	p := &Plugin{Name: "idle", Version: "1.0.0", Families: []*Family{{
		Name: "test.idle", Status: "stable", Since: "2.0",
		Methods: map[string]Handler{"noop": func(context.Context, *Request) (any, error) { return nil, nil }},
	}}}
	conn := inProcess(t, p, hclog.NewNullLogger())
	// Host services served as wire.ServeHostServices does, with a stats
	// handler that sees the plugin's connection.
	signal := &connSignal{began: make(chan struct{})}
	id := conn.Broker.NextId()
	go conn.Broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(append(opts, append(wire.ServerOptions(wire.DefaultMaxMessageBytes), grpc.StatsHandler(signal))...)...)
		wophostv1.RegisterHostServicesServer(s, &tokenHost{})
		return s
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := conn.Client.Configure(ctx, &wophostv1.ConfigureRequest{Config: []byte(`{}`), HostServicesBrokerId: id}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-signal.began:
	case <-ctx.Done():
		t.Fatal("the plugin did not connect to host services after Configure, before any call")
	}
}

// inProcess serves p over go-plugin's in-process gRPC connection, as
// Plugin.GRPCPlugin hands it to the conformance kit, and returns the
// host's side of it.
func inProcess(t *testing.T, p *Plugin, logger hclog.Logger) *wire.CapabilityConn {
	t.Helper()
	client, srv := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{wire.KindCapability: p.GRPCPlugin(logger)})
	t.Cleanup(func() {
		srv.Stop()
		_ = client.Close()
	})
	raw, err := client.Dispense(wire.KindCapability)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(*wire.CapabilityConn)
}
