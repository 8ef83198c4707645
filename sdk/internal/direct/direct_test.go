package direct

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/protobuf/proto"

	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// echo is a handler that answers with the call context it got.
func echo(_ context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
	if method == "fail" {
		return nil, wop.Errorf(wop.CodeNotFound, "no such thing").WithCapability("host." + family + "." + method)
	}
	if method == "big" {
		return []byte(`"` + strings.Repeat("x", 200) + `"`), nil
	}
	return json.Marshal(map[string]any{
		"run": call.RunID, "node": call.NodeID, "caller": call.Caller, "depth": call.Depth,
		"token": call.Token.Reveal(), "payload": json.RawMessage(payload),
	})
}

// fixture is an endpoint serving echo and a pool to reach it.
type fixture struct {
	t    *testing.T
	ep   *Endpoint
	at   *wophostv1.DirectChannelEndpoint
	key  []byte
	pool *Pool
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, echo, &wophostv1.DirectChannelSettings{})
}

// newFixtureWith is a fixture whose endpoint serves handle, opened with
// settings (its key and socket directory filled in).
func newFixtureWith(t *testing.T, handle Handler, settings *wophostv1.DirectChannelSettings) *fixture {
	t.Helper()
	f := &fixture{t: t, ep: NewEndpoint(handle, 1<<20), key: NewKey(), pool: NewPool(1 << 20)}
	settings.GrantKey, settings.SocketDir = f.key, t.TempDir()
	if settings.Rules == nil {
		settings.Rules = RulesToProto(testRules())
	}
	at, err := f.ep.Open(settings)
	if err != nil {
		t.Fatal(err)
	}
	f.at = at
	t.Cleanup(func() { f.pool.Close(); f.ep.Close() })
	return f
}

// testRules are the rules the host sends for the fixture's families:
// aiEnvelope's as the contract fixes them (this package cannot import
// sdk/families), and no rule for acme.kv.
func testRules() map[string]admission.Rules {
	return map[string]admission.Rules{
		wop.FamilyAIEnvelope: {Facets: []wop.FacetRule{{Method: "await", Facet: "await"}, {Method: "generate", Facet: "await", When: "async"}}},
		"acme.kv":            {},
	}
}

// grant is a grant for run_1 on acme.kv and aiEnvelope (without await).
func grant() *wophostv1.Grant {
	return &wophostv1.Grant{
		RunId: "run_1", NodeId: "node_1", TypeId: "kv.remember", Pack: "acme.pack",
		Families: []*wophostv1.GrantedFamily{
			{Name: "acme.kv", Whole: true},
			{Name: wop.FamilyAIEnvelope, Whole: true},
		},
		DeadlineUnixNano: time.Now().Add(time.Minute).UnixNano(), Depth: 1, DepthLimit: 8, MaxBytes: 150,
		RunToken: "secret-token", Log: true,
	}
}

func (f *fixture) sign(g *wophostv1.Grant) []byte {
	f.t.Helper()
	b, err := Sign(f.key, g)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// invoke calls the endpoint as a pack would, with signed bytes as grant.
func (f *fixture) invoke(signed []byte, family, method, payload string) ([]byte, error) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc, err := f.pool.acquire(ctx, f.at)
	if err != nil {
		f.t.Fatal(err)
	}
	defer f.pool.release(pc)
	return pc.conn.call(ctx, &wophostv1.DirectChannelInvokeRequest{
		Family: family, Method: method, Payload: []byte(payload), Grant: signed,
	})
}

// isRefused reports whether err is the endpoint's refusal of a grant.
func isRefused(err error) bool {
	var r *refusal
	return errors.As(err, &r)
}

func TestCallRunsWithTheGrantsCallContext(t *testing.T) {
	f := newFixture(t)
	out, err := f.invoke(f.sign(grant()), "acme.kv", "get", `{"key":"a"}`)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"run": "run_1", "node": "node_1", "caller": "pack:acme.pack", "depth": 1.0, "token": "secret-token"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestGrantRules(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name   string
		edit   func(g *wophostv1.Grant)
		family string
		method string
		body   string
		code   string
	}{
		{"undeclared family", nil, "acme.other", "get", `{}`, wop.CodeCapabilityNotDeclared},
		{"undeclared facet", nil, wop.FamilyAIEnvelope, "await", `{}`, wop.CodeCapabilityNotDeclared},
		{"async generate needs await", nil, wop.FamilyAIEnvelope, "generate", `{"async":true}`, wop.CodeCapabilityNotDeclared},
		{"request over the size limit", nil, "acme.kv", "get", `"` + strings.Repeat("y", 200) + `"`, wop.CodeValidation},
		{"result over the size limit", nil, "acme.kv", "big", `{}`, wop.CodeUpstreamUnavailable},
		{"depth over the limit", func(g *wophostv1.Grant) { g.DepthLimit = 0 }, "acme.kv", "get", `{}`, wop.CodeCallDepthExceeded},
		{"deadline passed", func(g *wophostv1.Grant) { g.DeadlineUnixNano = time.Now().Add(-time.Second).UnixNano() }, "acme.kv", "get", `{}`, wop.CodeDeadlineExceeded},
		{"handler's own error", nil, "acme.kv", "fail", `{}`, wop.CodeNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := grant()
			g.RunId = "run_" + strings.ReplaceAll(tc.name, " ", "_")
			if tc.edit != nil {
				tc.edit(g)
			}
			_, err := f.invoke(f.sign(g), tc.family, tc.method, tc.body)
			if err == nil {
				t.Fatal("the call passed")
			}
			if isRefused(err) {
				t.Fatalf("refused as a grant, want the envelope %s: %v", tc.code, err)
			}
			if got := codeOf(err); got != tc.code {
				t.Fatalf("code %q, want %q (%v)", got, tc.code, err)
			}
		})
	}
	t.Run("declared facet passes", func(t *testing.T) {
		g := grant()
		g.Families[1].Facets = []string{"await"}
		if _, err := f.invoke(f.sign(g), wop.FamilyAIEnvelope, "generate", `{"async":true}`); err != nil {
			t.Fatal(err)
		}
	})
}

func TestForgedGrantsAreRefused(t *testing.T) {
	f := newFixture(t)
	signed := f.sign(grant())
	var sg wophostv1.SignedGrant
	if err := proto.Unmarshal(signed, &sg); err != nil {
		t.Fatal(err)
	}
	var g wophostv1.Grant
	if err := proto.Unmarshal(sg.GetGrant(), &g); err != nil {
		t.Fatal(err)
	}
	// A pack that adds a family to its grant and keeps the host's MAC.
	g.Families = append(g.Families, &wophostv1.GrantedFamily{Name: "acme.other", Whole: true})
	body, _ := proto.Marshal(&g)
	widened, _ := proto.Marshal(&wophostv1.SignedGrant{Grant: body, Mac: sg.GetMac()})
	// A grant signed with a key of its own.
	own, _ := Sign(NewKey(), grant())
	for name, b := range map[string][]byte{
		"widened":   widened,
		"own key":   own,
		"no grant":  nil,
		"garbage":   []byte("not a grant"),
		"empty mac": mustMarshal(t, &wophostv1.SignedGrant{Grant: sg.GetGrant()}),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := f.invoke(b, "acme.other", "get", `{}`); !isRefused(err) {
				t.Fatalf("want a refused grant, got %v", err)
			}
		})
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEndRunRevokesTheGrantAndHandsOverTheCalls(t *testing.T) {
	f := newFixture(t)
	signed := f.sign(grant())
	if _, err := f.invoke(signed, "acme.kv", "get", `{"key":"a"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.invoke(signed, "acme.kv", "fail", `{}`); err == nil {
		t.Fatal("fail passed")
	}
	resp := f.ep.EndRun("run_1", time.Now().Add(time.Minute))
	if len(resp.GetCalls()) != 2 {
		t.Fatalf("%d calls handed over, want 2", len(resp.GetCalls()))
	}
	c0, c1 := resp.GetCalls()[0], resp.GetCalls()[1]
	if c0.GetMethod() != "get" || string(c0.GetPayload()) != `{"key":"a"}` || len(c0.GetResult()) == 0 || c0.GetStartedUnixNano() == 0 {
		t.Errorf("first call %v", c0)
	}
	var we wop.Error
	if err := json.Unmarshal(c1.GetError(), &we); err != nil || we.Code != wop.CodeNotFound {
		t.Errorf("second call's error %s (%v)", c1.GetError(), err)
	}
	// The same grant, used again once its run ended, is refused.
	if _, err := f.invoke(signed, "acme.kv", "get", `{}`); !isRefused(err) {
		t.Fatalf("a grant of an ended run: want refused, got %v", err)
	}
	// So is a fresh grant of the ended run.
	if _, err := f.invoke(f.sign(grant()), "acme.kv", "get", `{}`); !isRefused(err) {
		t.Fatalf("a new grant of an ended run: want refused, got %v", err)
	}
}

func TestANewKeyRevokesEveryGrant(t *testing.T) {
	f := newFixture(t)
	signed := f.sign(grant())
	if _, err := f.invoke(signed, "acme.kv", "get", `{}`); err != nil {
		t.Fatal(err)
	}
	f.key = NewKey()
	if _, err := f.ep.Open(&wophostv1.DirectChannelSettings{GrantKey: f.key, SocketDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.invoke(signed, "acme.kv", "get", `{}`); !isRefused(err) {
		t.Fatalf("a grant of the old key: want refused, got %v", err)
	}
}

func TestGrantWithoutDeadlineisRefused(t *testing.T) {
	f := newFixture(t)
	g := grant()
	g.DeadlineUnixNano = 0
	if _, err := f.invoke(f.sign(g), "acme.kv", "get", `{}`); !isRefused(err) {
		t.Fatalf("want refused, got %v", err)
	}
}

func TestLogBounds(t *testing.T) {
	f := newFixture(t)
	g := grant()
	g.LogMaxCalls = 2
	signed := f.sign(g)
	for range 4 {
		if _, err := f.invoke(signed, "acme.kv", "get", `{}`); err != nil {
			t.Fatal(err)
		}
	}
	resp := f.ep.EndRun("run_1", time.Now().Add(time.Minute))
	if len(resp.GetCalls()) != 2 || resp.GetDropped() != 2 || resp.GetCutUnixNano() <= resp.GetCalls()[1].GetStartedUnixNano() {
		t.Fatalf("kept %d, dropped %d, cut %d", len(resp.GetCalls()), resp.GetDropped(), resp.GetCutUnixNano())
	}
	// Without a log only the method, time and code are kept.
	g = grant()
	g.RunId, g.Log = "run_2", false
	if _, err := f.invoke(f.sign(g), "acme.kv", "get", `{"key":"a"}`); err != nil {
		t.Fatal(err)
	}
	resp = f.ep.EndRun("run_2", time.Now().Add(time.Minute))
	if len(resp.GetCalls()) != 1 || resp.GetCalls()[0].GetPayload() != nil || resp.GetCalls()[0].GetResult() != nil {
		t.Fatalf("unlogged run kept %v", resp.GetCalls())
	}
}

// routed records the calls that took the routed path.
type routed struct{ calls atomic.Int32 }

func (r *routed) CallRaw(_ context.Context, family, method string, _ []byte) ([]byte, error) {
	r.calls.Add(1)
	return []byte(`"routed"`), nil
}

func TestCallerTakesTheChannelAndFallsBackToTheHost(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	offer := func(signed []byte, at *wophostv1.DirectChannelEndpoint) []*wophostv1.DirectChannelOffer {
		return []*wophostv1.DirectChannelOffer{{Families: []string{"acme.kv"}, Endpoint: at, Grant: signed}}
	}
	t.Run("offered family goes direct, others routed", func(t *testing.T) {
		r := &routed{}
		c := NewCaller(r, f.pool, offer(f.sign(grant()), f.at), noop.NewTracerProvider().Tracer(""), nil)
		out, err := c.CallRaw(ctx, "acme.kv", "get", []byte(`{}`))
		if err != nil || !strings.Contains(string(out), `"caller":"pack:acme.pack"`) || r.calls.Load() != 0 {
			t.Fatalf("direct call: %s, %v, %d routed", out, err, r.calls.Load())
		}
		if _, err := c.CallRaw(ctx, wop.FamilyPromptLibrary, "get", []byte(`{}`)); err != nil || r.calls.Load() != 1 {
			t.Fatalf("unoffered family: %v, %d routed", err, r.calls.Load())
		}
	})
	t.Run("a refused grant goes through the host", func(t *testing.T) {
		r := &routed{}
		g := grant()
		g.RunId = "run_refused"
		signed := f.sign(g)
		f.ep.EndRun("run_refused", time.Now().Add(time.Minute))
		c := NewCaller(r, f.pool, offer(signed, f.at), noop.NewTracerProvider().Tracer(""), nil)
		for range 2 {
			out, err := c.CallRaw(ctx, "acme.kv", "get", []byte(`{}`))
			if err != nil || string(out) != `"routed"` {
				t.Fatalf("%s, %v", out, err)
			}
		}
		if r.calls.Load() != 2 {
			t.Fatalf("%d routed calls, want 2", r.calls.Load())
		}
	})
	t.Run("an unreachable channel goes through the host", func(t *testing.T) {
		r := &routed{}
		gone := &wophostv1.DirectChannelEndpoint{Address: t.TempDir() + "/gone.sock", Certificate: f.at.GetCertificate()}
		c := NewCaller(r, f.pool, offer(f.sign(grant()), gone), noop.NewTracerProvider().Tracer(""), nil)
		out, err := c.CallRaw(ctx, "acme.kv", "get", []byte(`{}`))
		if err != nil || string(out) != `"routed"` {
			t.Fatalf("%s, %v", out, err)
		}
	})
	t.Run("an envelope is the caller's answer, not a fallback", func(t *testing.T) {
		r := &routed{}
		c := NewCaller(r, f.pool, offer(f.sign(grant()), f.at), noop.NewTracerProvider().Tracer(""), nil)
		_, err := c.CallRaw(ctx, "acme.kv", "fail", []byte(`{}`))
		var we *wop.Error
		if !errors.As(err, &we) || we.Code != wop.CodeNotFound || r.calls.Load() != 0 {
			t.Fatalf("%v, %d routed", err, r.calls.Load())
		}
	})
}

func codeOf(err error) string { return wire.CodeOfStatus(err) }

// max_concurrent_calls holds on the channel too: a call beyond it waits
// for a slot until its deadline.
func TestChannelCallSlots(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	handler := func(ctx context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
		if method == "block" {
			started <- struct{}{}
			<-release
		}
		return []byte(`{}`), nil
	}
	f := newFixtureWith(t, handler, &wophostv1.DirectChannelSettings{MaxConcurrentCalls: 1, Capability: "kv"})
	signed := f.sign(grant())
	done := make(chan error, 1)
	go func() {
		_, err := f.invoke(signed, "acme.kv", "block", `{}`)
		done <- err
	}()
	<-started
	g := grant()
	g.RunId = "run_waiting"
	g.DeadlineUnixNano = time.Now().Add(300 * time.Millisecond).UnixNano()
	_, err := f.invoke(f.sign(g), "acme.kv", "get", `{}`)
	if codeOf(err) != wop.CodeDeadlineExceeded || !strings.Contains(err.Error(), `call slots of capability "kv"`) {
		t.Fatalf("second call: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := f.invoke(signed, "acme.kv", "get", `{}`); err != nil {
		t.Fatalf("after the slot was freed: %v", err)
	}
}

// A plugin that goes away while a call is in flight fails the call as the
// host's router would: unavailable, retryable, and the call is not sent
// again through the host, since it may have had its effects.
func TestPluginGoneDuringTheCall(t *testing.T) {
	started := make(chan struct{}, 1)
	handler := func(ctx context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	f := newFixtureWith(t, handler, &wophostv1.DirectChannelSettings{})
	r := &routed{}
	c := NewCaller(r, f.pool, []*wophostv1.DirectChannelOffer{{Families: []string{"acme.kv"}, Endpoint: f.at, Grant: f.sign(grant())}}, noop.NewTracerProvider().Tracer(""), nil)
	go func() {
		<-started
		f.ep.Close()
	}()
	_, err := c.CallRaw(context.Background(), "acme.kv", "get", []byte(`{}`))
	var we *wop.Error
	if !errors.As(err, &we) || we.Code != wop.CodeUnavailable || !we.Retryable || r.calls.Load() != 0 {
		t.Fatalf("%v (retryable %v), %d routed", err, we != nil && we.Retryable, r.calls.Load())
	}
}

// A socket directory too deep for a unix socket's path is refused with a
// reason; the plugin then serves on the routed path alone.
func TestSocketPathTooLong(t *testing.T) {
	dir := t.TempDir() + "/" + strings.Repeat("d", 100)
	_, err := NewEndpoint(echo, 1<<20).Open(&wophostv1.DirectChannelSettings{GrantKey: NewKey(), SocketDir: dir})
	if err == nil || !strings.Contains(err.Error(), "over the 103 a unix socket allows") {
		t.Fatalf("got %v", err)
	}
}

// A channel call carries no timeout: the handler's context has no
// deadline from the channel (the plugin's SDK sets the grant's), and the
// end of the caller's context still ends the call on both sides, by a
// cancel frame.
func TestCallCarriesNoTimeoutAndEndsWithTheCaller(t *testing.T) {
	type seen struct {
		hasDeadline bool
		err         error
	}
	started, got := make(chan struct{}, 1), make(chan seen, 1)
	handler := func(ctx context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
		_, has := ctx.Deadline()
		started <- struct{}{}
		<-ctx.Done()
		got <- seen{has, ctx.Err()}
		return nil, ctx.Err()
	}
	f := newFixtureWith(t, handler, &wophostv1.DirectChannelSettings{})
	r := &routed{}
	c := NewCaller(r, f.pool, []*wophostv1.DirectChannelOffer{{Families: []string{"acme.kv"}, Endpoint: f.at, Grant: f.sign(grant())}}, noop.NewTracerProvider().Tracer(""), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	go func() {
		<-started
		cancel()
	}()
	_, err := c.CallRaw(ctx, "acme.kv", "get", []byte(`{}`))
	var we *wop.Error
	if !errors.As(err, &we) || we.Code != wop.CodeCancelled || r.calls.Load() != 0 {
		t.Fatalf("caller got %v, %d routed; want cancelled on the channel", err, r.calls.Load())
	}
	var s seen
	select {
	case s = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin's side of the call did not end with the caller's")
	}
	if s.hasDeadline {
		t.Error("the handler's context has a deadline from the channel: the call carried a timeout")
	}
	if !errors.Is(s.err, context.Canceled) {
		t.Errorf("handler's context ended with %v, want cancelled", s.err)
	}
}

// Calls on one connection are multiplexed: each caller gets its own
// answer, whatever order they end in.
func TestConcurrentCallsOnOneConnectionGetTheirOwnAnswers(t *testing.T) {
	handler := func(_ context.Context, _, _ string, payload []byte, _ wop.CallContext) ([]byte, error) {
		var n int
		if err := json.Unmarshal(payload, &n); err != nil {
			return nil, err
		}
		// Later calls end first.
		time.Sleep(time.Duration(40-n) * time.Millisecond / 10)
		return payload, nil
	}
	f := newFixtureWith(t, handler, &wophostv1.DirectChannelSettings{})
	c := NewCaller(&routed{}, f.pool, []*wophostv1.DirectChannelOffer{{Families: []string{"acme.kv"}, Endpoint: f.at, Grant: f.sign(grant())}}, noop.NewTracerProvider().Tracer(""), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, 40)
	for i := range 40 {
		go func() {
			out, err := c.CallRaw(ctx, "acme.kv", "get", []byte(strconv.Itoa(i)))
			if err == nil && string(out) != strconv.Itoa(i) {
				err = fmt.Errorf("call %d got the answer %s", i, out)
			}
			errs <- err
		}()
	}
	for range 40 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := len(f.pool.conns); n != 1 {
		t.Errorf("%d connections, want the one shared", n)
	}
}

// The connection's message size limit holds on each side: a request over
// it is a validation_error that is not sent (nor sent through the host),
// a result over it an upstream_unavailable, as on the routed path.
func TestMessageSizeLimitOfTheConnection(t *testing.T) {
	handler := func(_ context.Context, _, method string, payload []byte, _ wop.CallContext) ([]byte, error) {
		if method == "big" {
			return []byte(`"` + strings.Repeat("x", 600) + `"`), nil
		}
		return payload, nil
	}
	ep := NewEndpoint(handler, 512)
	key := NewKey()
	at, err := ep.Open(&wophostv1.DirectChannelSettings{GrantKey: key, SocketDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	pool := NewPool(512)
	t.Cleanup(func() { pool.Close(); ep.Close() })
	g := grant()
	g.MaxBytes = 0
	signed, err := Sign(key, g)
	if err != nil {
		t.Fatal(err)
	}
	r := &routed{}
	c := NewCaller(r, pool, []*wophostv1.DirectChannelOffer{{Families: []string{"acme.kv"}, Endpoint: at, Grant: signed}}, noop.NewTracerProvider().Tracer(""), nil)
	ctx := context.Background()
	if _, err := c.CallRaw(ctx, "acme.kv", "get", []byte(`"`+strings.Repeat("y", 600)+`"`)); codeOf(err) != wop.CodeValidation || !strings.Contains(err.Error(), "512-byte message limit") {
		t.Errorf("request over the limit: %v", err)
	}
	if _, err := c.CallRaw(ctx, "acme.kv", "big", []byte(`{}`)); codeOf(err) != wop.CodeUpstreamUnavailable || !strings.Contains(err.Error(), "512-byte message limit") {
		t.Errorf("result over the limit: %v", err)
	}
	if out, err := c.CallRaw(ctx, "acme.kv", "get", []byte(`{}`)); err != nil || string(out) != `{}` {
		t.Errorf("a call within the limit after both: %s, %v", out, err)
	}
	if r.calls.Load() != 0 {
		t.Errorf("%d calls went through the host", r.calls.Load())
	}
}

// A frame longer than the limit is not read: the peer does not speak the
// protocol, and its connection is closed.
func TestOversizedFrameClosesTheConnection(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pc, err := f.pool.acquire(ctx, f.at)
	if err != nil {
		t.Fatal(err)
	}
	defer f.pool.release(pc)
	// The endpoint may close the connection before the write ends.
	_ = pc.conn.write(encodeFrame(kindCall, 1, make([]byte, 2<<20)))
	select {
	case <-pc.conn.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the endpoint kept a connection that sent a frame over the limit")
	}
}

// A plugin that speaks another version of the channel's framing is not
// called on it: the handshake fails and the call goes through the host.
func TestAnotherVersionOfTheFramingIsNotUsed(t *testing.T) {
	cert, err := wire.SelfSignedCertificate()
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/other.sock"
	l, err := tls.Listen("unix", path, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"wophost-direct/3"}})
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
			go func() { _ = c.(*tls.Conn).Handshake(); _ = c.Close() }()
		}
	}()
	at := &wophostv1.DirectChannelEndpoint{Address: path, Certificate: cert.Certificate[0]}
	r := &routed{}
	c := NewCaller(r, NewPool(1<<20), []*wophostv1.DirectChannelOffer{{Families: []string{"acme.kv"}, Endpoint: at, Grant: []byte("grant")}}, noop.NewTracerProvider().Tracer(""), nil)
	if out, err := c.CallRaw(context.Background(), "acme.kv", "get", []byte(`{}`)); err != nil || string(out) != `"routed"` || r.calls.Load() != 1 {
		t.Fatalf("%s, %v, %d routed", out, err, r.calls.Load())
	}
}

// A plugin that no longer reads its side of the channel does not hold the
// caller past the write bound: the connection fails, and the call with it,
// as unavailable.
func TestAPeerThatStopsReadingFailsTheConnection(t *testing.T) {
	cert, err := wire.SelfSignedCertificate()
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/deaf.sock"
	l, err := tls.Listen("unix", path, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{ALPN}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		// Completes the handshake, then reads nothing.
		_ = c.(*tls.Conn).Handshake()
		held <- c
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dial(ctx, &wophostv1.DirectChannelEndpoint{Address: path, Certificate: cert.Certificate[0]}, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	defer func() {
		if nc := <-held; nc != nil {
			_ = nc.Close()
		}
	}()
	c.writeTimeout = 200 * time.Millisecond
	sent := make(chan error, 1)
	go func() {
		// Far more than the socket's buffers hold.
		_, err := c.send(context.Background(), kindCall, make([]byte, 8<<20))
		sent <- err
	}()
	select {
	case err := <-sent:
		if !errors.Is(err, ErrGone) || !c.failed() {
			t.Fatalf("got %v (failed %v), want the connection gone", err, c.failed())
		}
	case <-ctx.Done():
		c.close()
		t.Fatal("the write was still held after 10 s")
	}
}

// A pack that no longer reads its answers loses its connection past the
// write bound, rather than holding the plugin's handlers.
func TestACallerThatStopsReadingLosesTheConnection(t *testing.T) {
	handler := func(context.Context, string, string, []byte, wop.CallContext) ([]byte, error) {
		return []byte(`"` + strings.Repeat("x", 512<<10) + `"`), nil
	}
	f := newFixtureWith(t, handler, &wophostv1.DirectChannelSettings{})
	f.ep.writeTimeout = 200 * time.Millisecond
	g := grant()
	g.MaxBytes = 0
	signed := f.sign(g)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := mustMarshal(t, &wophostv1.DirectChannelInvokeRequest{Family: "acme.kv", Method: "get", Payload: []byte(`{}`), Grant: signed})
	// A connection of the test's own, whose answers it does not read.
	raw, err := net.Dial("unix", f.at.GetAddress())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	roots := x509.NewCertPool()
	cert, err := x509.ParseCertificate(f.at.GetCertificate())
	if err != nil {
		t.Fatal(err)
	}
	roots.AddCert(cert)
	tc := tls.Client(raw, &tls.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{ALPN}})
	if err := tc.HandshakeContext(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 32 {
		if _, err := tc.Write(encodeFrame(kindCall, uint64(i+1), body)); err != nil {
			break
		}
	}
	time.Sleep(time.Second)
	// Whatever the plugin wrote before it gave up is there to read; then
	// the connection ends.
	_ = tc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, tc); err != nil && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("the plugin kept the connection of a caller that stopped reading: %v", err)
	}
}

// counting wraps echo and counts the calls that reached the plugin's
// handler.
func counting(n *atomic.Int32) Handler {
	return func(ctx context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
		n.Add(1)
		return echo(ctx, family, method, payload, call)
	}
}

// The end of one run forgets only the ended runs whose grants have
// expired: a grant a pack kept from a run that ended before stays
// refused.
func TestAnEndedRunStaysRefusedWhenAnotherEnds(t *testing.T) {
	var ran atomic.Int32
	f := newFixtureWith(t, counting(&ran), &wophostv1.DirectChannelSettings{})
	first := f.sign(grant())
	g := grant()
	g.RunId = "run_2"
	second := f.sign(g)
	for _, signed := range [][]byte{first, second} {
		if _, err := f.invoke(signed, "acme.kv", "get", `{}`); err != nil {
			t.Fatal(err)
		}
	}
	f.ep.EndRun("run_1", time.Now().Add(time.Minute))
	f.ep.EndRun("run_2", time.Now().Add(time.Minute))
	for name, signed := range map[string][]byte{
		"run 1's grant":        first,
		"a new grant of run 1": f.sign(grant()),
		"run 2's grant":        second,
	} {
		if _, err := f.invoke(signed, "acme.kv", "get", `{}`); !isRefused(err) {
			t.Errorf("%s after both runs ended: want refused, got %v", name, err)
		}
	}
	if n := ran.Load(); n != 2 {
		t.Errorf("the handler ran %d calls, want the 2 made before the runs ended", n)
	}
}

// The pack trusts the certificate the host offered and no other: a
// channel on the offered address that shows another certificate is not
// called, and the call goes through the host.
func TestAnotherCertificateOnTheAddressIsNotTrusted(t *testing.T) {
	var ran atomic.Int32
	f := newFixtureWith(t, counting(&ran), &wophostv1.DirectChannelSettings{})
	other, err := wire.SelfSignedCertificate()
	if err != nil {
		t.Fatal(err)
	}
	forged := &wophostv1.DirectChannelEndpoint{Address: f.at.GetAddress(), Certificate: other.Certificate[0]}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := dial(ctx, forged, 1<<20); err == nil {
		c.close()
		t.Error("dialed a channel whose certificate is not the one pinned")
	}
	r := &routed{}
	signed := f.sign(grant())
	c := NewCaller(r, f.pool, []*wophostv1.DirectChannelOffer{{Families: []string{"acme.kv"}, Endpoint: forged, Grant: signed}}, noop.NewTracerProvider().Tracer(""), nil)
	if out, err := c.CallRaw(ctx, "acme.kv", "get", []byte(`{}`)); err != nil || string(out) != `"routed"` || r.calls.Load() != 1 {
		t.Fatalf("%s, %v, %d routed; want the call through the host", out, err, r.calls.Load())
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the handler ran %d calls pinned to another certificate", n)
	}
	// The offered certificate reaches the same handler.
	c = NewCaller(r, f.pool, []*wophostv1.DirectChannelOffer{{Families: []string{"acme.kv"}, Endpoint: f.at, Grant: signed}}, noop.NewTracerProvider().Tracer(""), nil)
	if _, err := c.CallRaw(ctx, "acme.kv", "get", []byte(`{}`)); err != nil || ran.Load() != 1 || r.calls.Load() != 1 {
		t.Fatalf("with the offered certificate: %v, %d ran, %d routed", err, ran.Load(), r.calls.Load())
	}
}

// A call's own deadline shortens the grant's for the handler's call
// context, and never extends it: one a nanosecond past the grant's, or
// none, leaves the grant's.
func TestCallDeadlineOnlyShortensTheGrants(t *testing.T) {
	seen := make(chan time.Time, 1)
	handler := func(_ context.Context, _, _ string, _ []byte, call wop.CallContext) ([]byte, error) {
		seen <- call.Deadline
		return []byte(`{}`), nil
	}
	f := newFixtureWith(t, handler, &wophostv1.DirectChannelSettings{})
	g := grant()
	granted := time.Unix(0, g.DeadlineUnixNano)
	signed := f.sign(g)
	sooner := time.Now().Add(5 * time.Second)
	for _, c := range []struct {
		name string
		call int64
		want time.Time
	}{
		{"sooner", sooner.UnixNano(), sooner},
		{"a nanosecond past the grant's", granted.UnixNano() + 1, granted},
		{"an hour past the grant's", granted.Add(time.Hour).UnixNano(), granted},
		{"none", 0, granted},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		pc, err := f.pool.acquire(ctx, f.at)
		if err != nil {
			t.Fatal(err)
		}
		_, err = pc.conn.call(ctx, &wophostv1.DirectChannelInvokeRequest{
			Family: "acme.kv", Method: "get", Payload: []byte(`{}`), Grant: signed, DeadlineUnixNano: c.call,
		})
		f.pool.release(pc)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := <-seen; !got.Equal(c.want) {
			t.Errorf("%s: the handler's deadline is %s, want %s", c.name, got, c.want)
		}
	}
}

// A caller bound by BoundCalls ends a call the plugin holds at the bound,
// as deadline_exceeded, and the call carries that deadline to the plugin.
func TestBoundCallsEndAHeldCall(t *testing.T) {
	seen := make(chan time.Time, 1)
	handler := func(ctx context.Context, _, _ string, _ []byte, call wop.CallContext) ([]byte, error) {
		seen <- call.Deadline
		<-ctx.Done()
		return nil, ctx.Err()
	}
	f := newFixtureWith(t, handler, &wophostv1.DirectChannelSettings{})
	r := &routed{}
	c := NewCaller(r, f.pool, []*wophostv1.DirectChannelOffer{{Families: []string{"acme.kv"}, Endpoint: f.at, Grant: f.sign(grant())}}, noop.NewTracerProvider().Tracer(""), nil)
	c.BoundCalls(200 * time.Millisecond)
	// The caller's own deadline is 20 s away, the grant's a minute.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	before := time.Now()
	_, err := c.CallRaw(ctx, "acme.kv", "get", []byte(`{}`))
	if codeOf(err) != wop.CodeDeadlineExceeded || r.calls.Load() != 0 {
		t.Fatalf("caller got %v, %d routed; want deadline_exceeded on the channel", err, r.calls.Load())
	}
	// The handler's deadline is the bound's, not the caller's or the
	// grant's.
	if d := <-seen; d.Sub(before) > 5*time.Second {
		t.Errorf("the handler's deadline is %s after the call, want the 200 ms bound", d.Sub(before))
	}
}
