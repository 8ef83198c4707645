package direct

import (
	"context"
	"crypto/tls"
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
	cancelOnceStarted(t, started, ended, func(ctx context.Context) (bool, error) {
		_, sent, err := r.Invoke(ctx, relayRequest("get"))
		return sent, err
	})
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

// endRequest ends run_1, the run of grant().
func endRequest() *wophostv1.EndRunRequest {
	return &wophostv1.EndRunRequest{RunId: "run_1", DeadlineUnixNano: time.Now().Add(time.Minute).UnixNano()}
}

// The host ends a run on the channel as it would on gRPC: the run's grant
// is refused from then on, and the answer holds the call the run made.
func TestEndRunOnTheChannel(t *testing.T) {
	f := newFixture(t)
	signed := f.sign(grant())
	if _, err := f.invoke(signed, "acme.kv", "get", `{"key":"a"}`); err != nil {
		t.Fatal(err)
	}
	r := NewRelay(f.at, f.key, 1<<20)
	defer r.Close()
	resp, sent, err := r.EndRun(context.Background(), endRequest())
	if err != nil || !sent {
		t.Fatalf("%v, sent %v", err, sent)
	}
	if calls := resp.GetCalls(); len(calls) != 1 || calls[0].GetFamily() != "acme.kv" || calls[0].GetMethod() != "get" {
		t.Errorf("the run's calls: %v; want its one acme.kv.get", calls)
	}
	if _, err := f.invoke(signed, "acme.kv", "get", `{}`); !isRefused(err) {
		t.Errorf("the grant of the run ended on the channel: want refused, got %v", err)
	}
}

// Ending a run on the channel needs the channel's key, and neither a
// relayed call's MAC nor a grant's passes for an end's (nor an end's for a
// relayed call's): the run goes on.
func TestEndRunOnTheChannelNeedsTheKey(t *testing.T) {
	f := newFixture(t)
	signed := f.sign(grant())
	near := append([]byte(nil), f.key...)
	near[len(near)-1] ^= 1
	for name, key := range map[string][]byte{"the key with its last bit changed": near, "own key": NewKey(), "no key": nil} {
		r := NewRelay(f.at, key, 1<<20)
		if resp, sent, err := r.EndRun(context.Background(), endRequest()); sent || err != nil || resp != nil {
			t.Errorf("%s: %v, %v, sent %v; want not sent", name, resp, err, sent)
		}
		r.Close()
	}
	end := mustMarshal(t, endRequest())
	invoke := mustMarshal(t, relayRequest("get"))
	pc, err := f.pool.acquire(context.Background(), f.at)
	if err != nil {
		t.Fatal(err)
	}
	defer f.pool.release(pc)
	for name, body := range map[string][]byte{
		"an end under a relayed call's MAC": append(relayMAC(f.key, end), end...),
		"an end under a grant's MAC":        append(mac(f.key, end), end...),
		"an end without a MAC":              end[:min(len(end), 16)],
	} {
		if _, err := pc.conn.roundTrip(context.Background(), kindEndRun, body); !isRefused(err) {
			t.Errorf("%s: want refused, got %v", name, err)
		}
	}
	if _, err := pc.conn.roundTrip(context.Background(), kindRelay, append(endRunMAC(f.key, invoke), invoke...)); !isRefused(err) {
		t.Errorf("a relayed call under an end's MAC: want refused, got %v", err)
	}
	if _, err := f.invoke(signed, "acme.kv", "get", `{}`); err != nil {
		t.Errorf("the run's grant after the refused ends: %v; want it still served", err)
	}
}

// A plugin built before version 2 of the framing speaks wophost-direct/1
// alone: the host's calls still go on its channel, but not the end of a
// run, which it does not know (the host sends that on gRPC).
func TestEndRunIsNotSentToAVersion1Plugin(t *testing.T) {
	f := newFixture(t)
	cert, err := wire.SelfSignedCertificate()
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/v1.sock"
	l, err := tls.Listen("unix", path, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13, NextProtos: []string{alpnV1}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go f.ep.serve(c.(*tls.Conn))
		}
	}()
	r := NewRelay(&wophostv1.DirectChannelEndpoint{Address: path, Certificate: cert.Certificate[0]}, f.key, 1<<20)
	defer r.Close()
	if _, sent, err := r.Invoke(context.Background(), relayRequest("get")); err != nil || !sent {
		t.Fatalf("a relayed call to a version 1 plugin: %v, sent %v", err, sent)
	}
	if resp, sent, err := r.EndRun(context.Background(), endRequest()); sent || err != nil || resp != nil {
		t.Fatalf("the end of a run to a version 1 plugin: %v, %v, sent %v; want not sent", resp, err, sent)
	}
	if _, err := f.invoke(f.sign(grant()), "acme.kv", "get", `{}`); err != nil {
		t.Errorf("the run's grant after the end not sent: %v; want it still served", err)
	}
}

// cancelOnceStarted makes call under a context cancelled as soon as the
// far side's handler says on started that it runs, and checks that call
// was sent and failed as cancelled, and that the handler's context ended
// with the caller's (the handler says so on ended).
func cancelOnceStarted(t *testing.T, started <-chan struct{}, ended <-chan error, call func(ctx context.Context) (sent bool, err error)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-started
		cancel()
	}()
	if sent, err := call(ctx); codeOf(err) != wop.CodeCancelled || !sent {
		t.Fatalf("cancelled: %v, sent %v", err, sent)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the far side's context ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the far side did not stop with the caller")
	}
}
