package direct

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// relayRequest is a call the host relays for an agent at depth 2.
func relayRequest(method string) *wophostv1.InvokeRequest {
	return &wophostv1.InvokeRequest{
		Family: "acme.kv", Method: method, Payload: []byte(`{"key":"a"}`),
		Call: wire.CallContextToProto(wop.CallContext{
			RunID: "run_9", NodeID: "node_9", Caller: "agent:a1", Depth: 2,
			Deadline: time.Now().Add(time.Minute),
		}),
	}
}

// A relayed call runs with the call context the host sent, as Invoke
// would, and without a grant: it is not the pack's, and not in the run's
// channel log, which holds the pack's own calls.
func TestRelayedCallRunsWithTheHostsCallContext(t *testing.T) {
	f := newFixture(t)
	r := NewRelay(f.at, f.key, 1<<20)
	defer r.Close()
	out, sent, err := r.Invoke(context.Background(), relayRequest("get"))
	if err != nil || !sent {
		t.Fatalf("%v, sent %v", err, sent)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got["run"] != "run_9" || got["caller"] != "agent:a1" || got["depth"] != 2.0 {
		t.Errorf("call context %v", got)
	}
	if calls := f.ep.EndRun("run_9", time.Now().Add(time.Minute)).GetCalls(); len(calls) != 0 {
		t.Errorf("the relayed call is in the channel's log: %v", calls)
	}
	if _, _, err := r.Invoke(context.Background(), relayRequest("fail")); codeOf(err) != wop.CodeNotFound {
		t.Errorf("handler's error: %v", err)
	}
}

// A relayed call needs the channel's key: a pack, which may connect to the
// socket but holds no key, cannot pass a call off as the host's, and a
// key of an earlier configuration no longer works; the host then sends
// the call on the gRPC connection.
func TestRelayedCallNeedsTheKey(t *testing.T) {
	f := newFixture(t)
	for name, key := range map[string][]byte{"own key": NewKey(), "no key": nil} {
		t.Run(name, func(t *testing.T) {
			r := NewRelay(f.at, key, 1<<20)
			defer r.Close()
			if out, sent, err := r.Invoke(context.Background(), relayRequest("get")); sent || err != nil || out != nil {
				t.Fatalf("a relay without the key: %s, %v, sent %v", out, err, sent)
			}
		})
	}
	t.Run("a grant's MAC", func(t *testing.T) {
		// The bytes and MAC of a signed grant, which a pack holds, do not
		// make a relayed call.
		body := mustMarshal(t, relayRequest("get"))
		pc, err := f.pool.acquire(context.Background(), f.at)
		if err != nil {
			t.Fatal(err)
		}
		defer f.pool.release(pc)
		if _, err := pc.conn.roundTrip(context.Background(), kindRelay, append(mac(f.key, body), body...)); !isRefused(err) {
			t.Fatalf("want refused, got %v", err)
		}
	})
	t.Run("rekeyed", func(t *testing.T) {
		r := NewRelay(f.at, f.key, 1<<20)
		defer r.Close()
		if _, sent, err := r.Invoke(context.Background(), relayRequest("get")); err != nil || !sent {
			t.Fatalf("%v, sent %v", err, sent)
		}
		key := NewKey()
		if _, err := f.ep.Open(&wophostv1.DirectChannelSettings{GrantKey: key, SocketDir: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
		if _, sent, err := r.Invoke(context.Background(), relayRequest("get")); err != nil || sent {
			t.Fatalf("with the old key: %v, sent %v; want not sent", err, sent)
		}
		r.Rekey(key)
		if _, sent, err := r.Invoke(context.Background(), relayRequest("get")); err != nil || !sent {
			t.Fatalf("with the new key: %v, sent %v", err, sent)
		}
	})
}

// A relayed call the host gives up on ends on the plugin's side too; one
// cut by the plugin going away is unavailable and retryable, and not sent
// again.
func TestRelayedCallEndsWithTheCallerAndWithThePlugin(t *testing.T) {
	started, ended := make(chan struct{}, 1), make(chan error, 1)
	handler := func(ctx context.Context, _, _ string, _ []byte, _ wop.CallContext) ([]byte, error) {
		started <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	}
	f := newFixtureWith(t, handler, &wophostv1.DirectChannelSettings{})
	r := NewRelay(f.at, f.key, 1<<20)
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	if _, sent, err := r.Invoke(ctx, relayRequest("get")); codeOf(err) != wop.CodeCancelled || !sent {
		t.Fatalf("cancelled call: %v, sent %v", err, sent)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the handler's context ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin's side of the call did not end with the host's")
	}
	go func() {
		<-started
		f.ep.Close()
	}()
	_, sent, err := r.Invoke(context.Background(), relayRequest("get"))
	var we *wop.Error
	if !errors.As(err, &we) || we.Code != wop.CodeUnavailable || !we.Retryable || !sent || !strings.Contains(we.Message, "closed during the call") {
		t.Fatalf("plugin gone: %v, sent %v", err, sent)
	}
	<-ended
	// The channel is gone: the next call cannot be sent there.
	if _, sent, err := r.Invoke(context.Background(), relayRequest("get")); sent || err != nil {
		t.Fatalf("after the plugin went: %v, sent %v", err, sent)
	}
}
