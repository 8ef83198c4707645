package plugin

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/otel/trace/noop"

	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wire"
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
	set := map[string]goplugin.Plugin{wire.KindCapability: &wire.CapabilityPlugin{
		NewServer: func(b *goplugin.GRPCBroker) wophostv1.CapabilityServer {
			return newServer(p, b, hclog.NewNullLogger(), wire.DefaultMaxMessageBytes, noop.NewTracerProvider().Tracer("test"))
		},
	}}
	client, srv := goplugin.TestPluginGRPCConn(t, false, set)
	t.Cleanup(func() {
		srv.Stop()
		_ = client.Close()
	})
	raw, err := client.Dispense(wire.KindCapability)
	if err != nil {
		t.Fatal(err)
	}
	conn := raw.(*wire.CapabilityConn)
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
