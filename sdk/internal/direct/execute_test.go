package direct

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// packFixture is a pack's channel whose node runs go to run, and the key
// it was opened with.
type packFixture struct {
	ep   *Endpoint
	at   *wophostv1.DirectChannelEndpoint
	key  []byte
	pool *Pool
	// runs counts the node runs that reached run.
	runs atomic.Int64
}

func newPackFixture(t *testing.T, run ExecuteHandler) *packFixture {
	t.Helper()
	f := &packFixture{key: NewKey(), pool: NewPool(1 << 20)}
	f.ep = NewExecuteEndpoint(func(ctx context.Context, req *wophostv1.ExecuteRequest) *wophostv1.ExecuteResponse {
		f.runs.Add(1)
		return run(ctx, req)
	}, 1<<20)
	at, err := f.ep.Open(&wophostv1.DirectChannelSettings{GrantKey: f.key, SocketDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f.at = at
	t.Cleanup(func() { f.pool.Close(); f.ep.Close() })
	return f
}

// echoNode answers a run with its input, or fails it when the node is
// "fail", with no output and an account of one call.
func echoNode(_ context.Context, req *wophostv1.ExecuteRequest) *wophostv1.ExecuteResponse {
	if req.GetTypeId() == "acme.fail" {
		return &wophostv1.ExecuteResponse{
			Failure:     wire.ToDetail(wop.Errorf("acme.refused", "the node refused %s", req.GetCall().GetRunId())),
			DirectCalls: &wophostv1.DirectCallLog{Calls: []*wophostv1.DirectCall{{Family: "acme.kv", Method: "get"}}},
		}
	}
	return &wophostv1.ExecuteResponse{Output: req.GetInput()}
}

func executeRequest(typeID string) *wophostv1.ExecuteRequest {
	return &wophostv1.ExecuteRequest{
		TypeId: typeID, Input: []byte(`{"n":7}`),
		Call: wire.CallContextToProto(wop.CallContext{RunID: "run_5", NodeID: "node_5", Deadline: time.Now().Add(time.Minute)}),
	}
}

// A node run on a pack's channel answers the ExecuteResponse the pack's
// gRPC Execute would, its failure carried in the answer with the
// account of its calls.
func TestExecuteRunsOnThePacksChannel(t *testing.T) {
	f := newPackFixture(t, echoNode)
	r := NewRelay(f.at, f.key, 1<<20)
	defer r.Close()
	resp, sent, err := r.Execute(context.Background(), executeRequest("acme.echo"))
	if err != nil || !sent || string(resp.GetOutput()) != `{"n":7}` || resp.GetFailure() != nil {
		t.Fatalf("run: %v, %v, sent %v", resp, err, sent)
	}
	resp, sent, err = r.Execute(context.Background(), executeRequest("acme.fail"))
	if err != nil || !sent {
		t.Fatalf("failed run: %v, sent %v; want its failure in the answer", err, sent)
	}
	if we := wire.FromDetail(resp.GetFailure()); we.Code != "acme.refused" || we.Message != "the node refused run_5" {
		t.Errorf("failure %v", we)
	}
	if calls := resp.GetDirectCalls().GetCalls(); len(calls) != 1 || calls[0].GetMethod() != "get" {
		t.Errorf("the failed run's account: %v", calls)
	}
}

// A node run needs the pack channel's key under the run's own MAC: with
// another key, a near miss of it, none, or the MAC of another frame, no
// run reaches the node, and the host may send the run on gRPC.
func TestExecuteNeedsThePacksKey(t *testing.T) {
	f := newPackFixture(t, echoNode)
	near := append([]byte(nil), f.key...)
	near[len(near)-1] ^= 1
	for name, key := range map[string][]byte{"the key with its last bit changed": near, "another key": NewKey(), "no key": nil} {
		r := NewRelay(f.at, key, 1<<20)
		if resp, sent, err := r.Execute(context.Background(), executeRequest("acme.echo")); sent || err != nil || resp != nil {
			t.Errorf("%s: %v, %v, sent %v; want not sent", name, resp, err, sent)
		}
		r.Close()
	}
	run := mustMarshal(t, executeRequest("acme.echo"))
	pc, err := f.pool.acquire(context.Background(), f.at)
	if err != nil {
		t.Fatal(err)
	}
	defer f.pool.release(pc)
	for name, body := range map[string][]byte{
		"a run under a relayed call's MAC": append(relayMAC(f.key, run), run...),
		"a run under an end's MAC":         append(endRunMAC(f.key, run), run...),
		"a run under a grant's MAC":        append(mac(f.key, run), run...),
		"a run without a MAC":              run[:min(len(run), 16)],
	} {
		if _, err := pc.conn.roundTrip(context.Background(), kindExecute, body); !isRefused(err) {
			t.Errorf("%s: want refused, got %v", name, err)
		}
	}
	if n := f.runs.Load(); n != 0 {
		t.Errorf("%d runs reached the node", n)
	}
	r := NewRelay(f.at, f.key, 1<<20)
	defer r.Close()
	if _, sent, err := r.Execute(context.Background(), executeRequest("acme.echo")); err != nil || !sent || f.runs.Load() != 1 {
		t.Errorf("with the key after the refusals: %v, sent %v, %d runs", err, sent, f.runs.Load())
	}
}

// Each channel serves its own frames: a pack's refuses a relayed call and
// the end of a run, even under its key, and a plugin's refuses a node
// run.
func TestChannelsServeOnlyTheirOwnFrames(t *testing.T) {
	p := newPackFixture(t, echoNode)
	pc, err := p.pool.acquire(context.Background(), p.at)
	if err != nil {
		t.Fatal(err)
	}
	defer p.pool.release(pc)
	invoke, end := mustMarshal(t, relayRequest("get")), mustMarshal(t, endRequest())
	if _, err := pc.conn.roundTrip(context.Background(), kindRelay, append(relayMAC(p.key, invoke), invoke...)); !isRefused(err) {
		t.Errorf("a relayed call on a pack's channel: want refused, got %v", err)
	}
	if _, err := pc.conn.roundTrip(context.Background(), kindEndRun, append(endRunMAC(p.key, end), end...)); !isRefused(err) {
		t.Errorf("the end of a run on a pack's channel: want refused, got %v", err)
	}
	f := newFixture(t)
	r := NewRelay(f.at, f.key, 1<<20)
	defer r.Close()
	if resp, sent, err := r.Execute(context.Background(), executeRequest("acme.echo")); sent || err != nil || resp != nil {
		t.Errorf("a node run on a plugin's channel: %v, %v, sent %v; want refused, not sent", resp, err, sent)
	}
}

// A run the host gives up on ends in the pack too; one cut by the pack
// going away fails with ErrGone, which the host tells from the node's
// failure, and is not sent again.
func TestExecuteEndsWithTheHostAndWithThePack(t *testing.T) {
	started, ended := make(chan struct{}, 1), make(chan error, 1)
	f := newPackFixture(t, func(ctx context.Context, _ *wophostv1.ExecuteRequest) *wophostv1.ExecuteResponse {
		started <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
		return &wophostv1.ExecuteResponse{Failure: wire.ToDetail(wire.FromContextError(ctx.Err()))}
	})
	r := NewRelay(f.at, f.key, 1<<20)
	defer r.Close()
	cancelOnceStarted(t, started, ended, func(ctx context.Context) (bool, error) {
		_, sent, err := r.Execute(ctx, executeRequest("acme.wait"))
		return sent, err
	})
	go func() {
		<-started
		f.ep.Close()
	}()
	before := f.runs.Load()
	if _, sent, err := r.Execute(context.Background(), executeRequest("acme.wait")); !errors.Is(err, ErrGone) || !sent {
		t.Fatalf("pack gone: %v, sent %v; want ErrGone", err, sent)
	}
	if n := f.runs.Load() - before; n != 1 {
		t.Errorf("the run reached the node %d times, want once", n)
	}
}
