package pack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// tokenHost records the run id and run token of every host-service call.
type tokenHost struct {
	mu    sync.Mutex
	calls map[string][]string // run id → the tokens its calls carried
}

func (h *tokenHost) Call(_ context.Context, req *wophostv1.CallRequest) (*wophostv1.CallResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := req.GetCall().GetRunId()
	h.calls[id] = append(h.calls[id], req.GetCall().GetRunToken())
	if req.GetFamily() == promptlibrary.Family {
		return &wophostv1.CallResponse{Result: []byte(`{"name":"p","version":"1","digest":"sha256:00","template":"t"}`)}, nil
	}
	return &wophostv1.CallResponse{Result: []byte(`{}`)}, nil
}

func (h *tokenHost) tokens(runID string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls[runID]...)
}

// packConn serves p through go-plugin itself (a real gRPC connection with
// real brokers) and returns the host's side of it and the broker id on
// which host serves HostServices to the pack.
func packConn(t *testing.T, p *Pack, host wophostv1.HostServicesServer) (wophostv1.PackClient, uint32) {
	t.Helper()
	set := map[string]goplugin.Plugin{wire.KindPack: &wire.PackPlugin{
		NewServer: func(b *goplugin.GRPCBroker) wophostv1.PackServer {
			return &server{p: p, broker: b, logger: hclog.NewNullLogger(), maxBytes: wire.DefaultMaxMessageBytes,
				tracer: noop.NewTracerProvider().Tracer("test"), hosts: map[uint32]*wire.HostCaller{}}
		},
	}}
	client, srv := goplugin.TestPluginGRPCConn(t, false, set)
	t.Cleanup(func() {
		srv.Stop()
		_ = client.Close()
	})
	raw, err := client.Dispense(wire.KindPack)
	if err != nil {
		t.Fatal(err)
	}
	conn, ok := raw.(*wire.PackConn)
	if !ok {
		t.Fatalf("dispensed %T", raw)
	}
	return conn.Client, wire.ServeHostServices(conn.Broker, host, wire.DefaultMaxMessageBytes)
}

// view is what node code can see of its run through ctx, printed every
// way it might be printed or logged.
func view(ctx *Ctx) string {
	call, _ := wop.CallContextFrom(ctx)
	run, _ := json.Marshal(ctx.Run)
	return strings.Join([]string{
		fmt.Sprintf("%v %+v %#v %s", ctx.Run, ctx.Run, ctx.Run, run),
		fmt.Sprintf("%v %+v %#v", call, call, call),
		fmt.Sprintf("%v %+v", *ctx, ctx.Context),
	}, "\n")
}

// Every ctx call of a node run carries the run's token, without node code
// touching it: ctx.Call, a family client, and a context derived from ctx.
// Two nodes in flight at once each carry their own token only, and
// neither can see the other's, nor print its own, through ctx.
func TestCtxCallsCarryTheRunToken(t *testing.T) {
	host := &tokenHost{calls: map[string][]string{}}
	bRan := make(chan struct{})
	views := map[string]string{}
	var mu sync.Mutex
	node := func(ctx *Ctx, _ json.RawMessage) (any, error) {
		if ctx.Run.TypeID == "test.a" {
			// a stays in flight until b has run.
			select {
			case <-bRan:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if err := ctx.Call("test.echo", "echo", map[string]any{}, nil); err != nil {
			return nil, err
		}
		if _, err := ctx.PromptLibrary.Get(ctx, &promptlibrary.GetRequest{PromptID: "p@1"}); err != nil {
			return nil, err
		}
		derived, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := ctx.host.Call(derived, "test.echo", "echo", map[string]any{}, nil); err != nil {
			return nil, err
		}
		mu.Lock()
		views[ctx.Run.TypeID] = view(ctx)
		mu.Unlock()
		if ctx.Run.TypeID == "test.b" {
			close(bRan)
		}
		return map[string]bool{"ok": true}, nil
	}
	p := &Pack{
		Manifest: []byte(`{"name":"test.tokens","nodes":[{"typeId":"test.a"},{"typeId":"test.b"}]}`),
		Nodes:    map[string]Node{"test.a": node, "test.b": node},
	}
	client, brokerID := packConn(t, p, host)

	secrets := map[string]string{"test.a": "token-of-a-0123456789", "test.b": "token-of-b-9876543210"}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, typeID := range []string{"test.a", "test.b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			call := wop.CallContext{RunID: "run_" + typeID, TypeID: typeID, Depth: 0, Token: wop.NewRunToken(secrets[typeID])}
			_, err := client.Execute(ctx, &wophostv1.ExecuteRequest{
				TypeId: typeID, Input: []byte(`{}`), Call: wire.CallContextToProto(call),
				Advertised: map[string][]byte{promptlibrary.Family: []byte(`{}`)}, HostServicesBrokerId: brokerID,
			})
			if err != nil {
				errs <- fmt.Errorf("%s: %v", typeID, wire.FromStatus(err))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for typeID, secret := range secrets {
		got := host.tokens("run_" + typeID)
		if len(got) != 3 {
			t.Errorf("%s made %d calls, want 3", typeID, len(got))
		}
		for i, tok := range got {
			if tok != secret {
				t.Errorf("%s call %d carried run token %q, want its own %q", typeID, i, tok, secret)
			}
		}
	}
	for typeID, v := range views {
		for other, secret := range secrets {
			if strings.Contains(v, secret) {
				t.Errorf("node %s can see the token of %s through ctx:\n%s", typeID, other, v)
			}
		}
		if !strings.Contains(v, "RunToken(redacted)") {
			t.Errorf("node %s's view shows no redacted token:\n%s", typeID, v)
		}
	}
}
