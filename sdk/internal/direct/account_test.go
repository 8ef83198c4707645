package direct

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/protobuf/proto"

	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// The account keeps each call made on a channel with the outcome the
// node got, and none that went through the host; once sealed, a call
// goes through the host.
func TestAccountKeepsTheChannelsCalls(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r := &routed{}
	refused := grant()
	refused.RunId = "run_ended"
	f.ep.EndRun("run_ended", time.Now().Add(time.Minute))
	a := NewAccount(0, 0)
	c := NewCaller(r, f.pool, []*wophostv1.DirectChannelOffer{
		{Families: []string{"acme.kv"}, Endpoint: f.at, Grant: f.sign(grant())},
		{Families: []string{"acme.other"}, Endpoint: f.at, Grant: f.sign(refused)},
	}, noop.NewTracerProvider().Tracer(""), a)
	if _, err := c.CallRaw(ctx, "acme.kv", "get", []byte(`{"k":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallRaw(ctx, "acme.kv", "fail", []byte(`{}`)); wop.CodeOf(err) != wop.CodeNotFound {
		t.Fatalf("fail: %v", err)
	}
	// Refused on the channel, then routed; and a family with no channel.
	if _, err := c.CallRaw(ctx, "acme.other", "get", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallRaw(ctx, wop.FamilyPromptLibrary, "get", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	log := a.Seal()
	if len(log.GetCalls()) != 2 || log.GetDropped() != 0 || r.calls.Load() != 2 {
		t.Fatalf("account %v, %d routed; want the 2 channel calls", log, r.calls.Load())
	}
	got, failed := log.GetCalls()[0], log.GetCalls()[1]
	if got.GetMethod() != "get" || string(got.GetPayload()) != `{"k":1}` || !strings.Contains(string(got.GetResult()), `"run":"run_1"`) || got.GetError() != nil {
		t.Errorf("first call %v", got)
	}
	var we wop.Error
	if failed.GetMethod() != "fail" || json.Unmarshal(failed.GetError(), &we) != nil || we.Code != wop.CodeNotFound || failed.GetResult() != nil ||
		failed.GetStartedUnixNano() < got.GetStartedUnixNano() {
		t.Errorf("second call %v", failed)
	}
	// Sealed: the node has returned, and a call it left behind goes
	// through the host, which knows the run has ended.
	if out, err := c.CallRaw(ctx, "acme.kv", "get", []byte(`{}`)); err != nil || string(out) != `"routed"` || r.calls.Load() != 3 {
		t.Fatalf("after the seal: %s, %v, %d routed", out, err, r.calls.Load())
	}
}

// A call still in flight when the account is sealed is one whose outcome
// the node never got: the account is cut at its start.
func TestAccountCutAtACallInFlight(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	f := newFixtureWith(t, func(ctx context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
		if method == "hold" {
			close(entered)
			<-release
		}
		return echo(ctx, family, method, payload, call)
	}, &wophostv1.DirectChannelSettings{})
	a := NewAccount(0, 0)
	c := NewCaller(&routed{}, f.pool, []*wophostv1.DirectChannelOffer{{Families: []string{"acme.kv"}, Endpoint: f.at, Grant: f.sign(grant())}},
		noop.NewTracerProvider().Tracer(""), a)
	if _, err := c.CallRaw(context.Background(), "acme.kv", "get", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.CallRaw(context.Background(), "acme.kv", "hold", []byte(`{}`))
		done <- err
	}()
	<-entered
	log := a.Seal()
	close(release)
	<-done
	if len(log.GetCalls()) != 1 || log.GetDropped() != 1 || log.GetCutReason() != cutInFlight ||
		log.GetCutUnixNano() <= log.GetCalls()[0].GetStartedUnixNano() {
		t.Fatalf("account %v; want the first call, and a cut at the one in flight", log)
	}
}

// The account holds to its bounds as the host's log does: a call past
// them, and every call after it, is left out from the first one's start.
func TestAccountBounds(t *testing.T) {
	one := func(a *Account, payload string) {
		e, _ := a.begin("acme.kv", "put", []byte(payload))
		a.end(e, []byte(`{}`), nil)
	}
	size := int64(len(`{"n":1}`) + len(`{}`) + len("acme.kv") + len("put"))
	for _, tc := range []struct {
		name          string
		calls, bytes  int64
		kept, dropped int
	}{
		{"calls at the bound", 2, 0, 2, 0},
		{"calls over it", 1, 0, 1, 1},
		{"bytes at the bound", 0, 2 * size, 2, 0},
		{"bytes over it by one", 0, 2*size - 1, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAccount(tc.calls, tc.bytes)
			one(a, `{"n":1}`)
			one(a, `{"n":2}`)
			log := a.Seal()
			if len(log.GetCalls()) != tc.kept || int(log.GetDropped()) != tc.dropped {
				t.Fatalf("%d kept, %d dropped; want %d, %d", len(log.GetCalls()), log.GetDropped(), tc.kept, tc.dropped)
			}
			if tc.dropped > 0 && log.GetCutReason() != cutBounds {
				t.Errorf("cut reason %q", log.GetCutReason())
			}
		})
	}
}

// An account that does not fit the node's answer loses its latest calls,
// counted as dropped from the first one lost.
func TestFitAccount(t *testing.T) {
	mk := func() *wophostv1.DirectCallLog {
		l := &wophostv1.DirectCallLog{}
		for i := range 3 {
			l.Calls = append(l.Calls, &wophostv1.DirectCall{Family: "acme.kv", Method: "get", Result: []byte(strings.Repeat("r", 100)), StartedUnixNano: int64(i + 1)})
		}
		return l
	}
	whole := proto.Size(mk())
	if l := FitAccount(mk(), whole); len(l.GetCalls()) != 3 || l.GetDropped() != 0 {
		t.Fatalf("at its size: %v", l)
	}
	l := FitAccount(mk(), whole-1)
	if len(l.GetCalls()) != 2 || l.GetDropped() != 1 || l.GetCutUnixNano() != 3 || l.GetCutReason() != cutFit || proto.Size(l) > whole-1 {
		t.Fatalf("one byte short: %v", l)
	}
	if l := FitAccount(mk(), 2); l != nil {
		t.Fatalf("no room: %v", l)
	}
}
