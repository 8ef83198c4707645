package plugintest

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/protobuf/proto"

	"github.com/wophost/wophost/sdk/internal/direct"
	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// directRunID is the run the direct-channel check grants.
const directRunID = "plugintest-direct-run"

// directChannel checks a plugin that says in Describe that it serves a
// direct channel: configured with a grant key (by the Configure rule), it
// answered where it serves the channel; the first sample call, sent there with a grant, succeeds;
// a grant it was not given, and the same grant once its run ended, are
// refused without running anything; EndRun hands over the run's call; and
// the host's relayed calls are served under the key and refused under
// another. Its part Refusal holds the channel to the admission table
// (refusals), each row a rule of its own.
func (c *protocolChecks) directChannel(t checkT) {
	c.needConfigured(t)
	const noChannel = "skipped: the plugin serves no direct channel (direct_channel unset in Describe)"
	serves := c.desc != nil && c.desc.DirectChannel
	key, ep := c.directKey, c.directEndpoint
	t.Run("Refusal", refusalText, func(t checkT) {
		switch {
		case !serves:
			t.Skip(noChannel)
		case ep.GetAddress() == "" || len(ep.GetCertificate()) == 0:
			t.Skip("skipped: Configure answered no direct channel")
		}
		c.refusals(t, key, ep)
	})
	if !serves {
		t.Skip(noChannel)
	}
	if ep.GetAddress() == "" || len(ep.GetCertificate()) == 0 {
		t.Fatalf("Configure answered no direct channel (address %q, %d certificate bytes) although Describe says the plugin serves one", ep.GetAddress(), len(ep.GetCertificate()))
	}
	g := &wophostv1.Grant{
		RunId: directRunID, NodeId: "plugintest-node", TypeId: "plugintest.node", Pack: "plugintest",
		DeadlineUnixNano: time.Now().Add(rpcTimeout).UnixNano(), Depth: 1, DepthLimit: 8,
		MaxBytes: wire.DefaultMaxMessageBytes, RunToken: c.p.tokens.bind(directRunID, wop.RunToken{}).Reveal(), Log: true,
	}
	for _, f := range c.desc.Families {
		gf := &wophostv1.GrantedFamily{Name: f.Name, Whole: true}
		for facet := range c.facets[f.Name] {
			gf.Facets = append(gf.Facets, facet)
		}
		slices.Sort(gf.Facets)
		g.Families = append(g.Families, gf)
	}
	signed, err := direct.Sign(key, g)
	if err != nil {
		t.Fatal(err)
	}
	pool := direct.NewPool(wire.DefaultMaxMessageBytes)
	defer pool.Close()
	call := func(grant []byte) (out []byte, routed bool, err error) {
		r := &routedCount{}
		caller := direct.NewCaller(r, pool, []*wophostv1.DirectChannelOffer{{Families: []string{c.first.Family}, Endpoint: ep, Grant: grant}}, noop.NewTracerProvider().Tracer(""), nil)
		ctx, cancel := context.WithTimeout(t.Context(), rpcTimeout)
		defer cancel()
		out, err = caller.CallRaw(ctx, c.first.Family, c.first.Method, orEmptyObject(c.first.Payload))
		return out, r.n.Load() > 0, err
	}
	out, routed, err := call(signed)
	switch {
	case routed:
		t.Fatalf("%s.%s on the direct channel: the plugin refused a grant made with the key it was configured with, or could not be reached at %s", c.first.Family, c.first.Method, ep.GetAddress())
	case err != nil:
		t.Fatalf("%s.%s on the direct channel failed: %s", c.first.Family, c.first.Method, formatError(err))
	case !json.Valid(out):
		t.Fatalf("%s.%s on the direct channel answered a result that is not JSON: %q", c.first.Family, c.first.Method, out)
	}
	if _, routed, _ := call(forged(t, signed)); !routed {
		t.Error("a grant whose MAC does not match was not refused")
	}
	ctx, cancel := context.WithTimeout(t.Context(), rpcTimeout)
	defer cancel()
	end, err := c.p.conn.Client.EndRun(ctx, &wophostv1.EndRunRequest{RunId: directRunID, DeadlineUnixNano: g.GetDeadlineUnixNano()})
	if err != nil {
		t.Fatalf("EndRun failed: %v", wire.FromStatus(err))
	}
	if n := len(end.GetCalls()); n != 1 || end.GetCalls()[0].GetFamily() != c.first.Family || end.GetCalls()[0].GetMethod() != c.first.Method {
		t.Errorf("EndRun handed over %d calls, want the one %s.%s", n, c.first.Family, c.first.Method)
	}
	if _, routed, _ := call(signed); !routed {
		t.Error("the grant of a run that ended was not refused")
	}
	c.relayedCalls(t, key, ep)
}

// relayedCalls checks the calls the host relays on the channel: the first
// sample call, under the configured key, runs as Invoke would run it; under
// another key it is refused, so that the host sends it as Invoke instead.
func (c *protocolChecks) relayedCalls(t checkT, key []byte, ep *wophostv1.DirectChannelEndpoint) {
	relay := func(key []byte) ([]byte, bool, error) {
		r := direct.NewRelay(ep, key, wire.DefaultMaxMessageBytes)
		defer r.Close()
		ctx, cancel := context.WithTimeout(t.Context(), rpcTimeout)
		defer cancel()
		call := wop.CallContext{RunID: directRunID + "-relayed", NodeID: "plugintest-node", TypeID: "plugintest.node", Caller: "plugintest", Depth: 1, Deadline: time.Now().Add(rpcTimeout)}
		call.Token = c.p.tokens.bind(call.RunID, call.Token)
		return r.Invoke(ctx, &wophostv1.InvokeRequest{
			Family: c.first.Family, Method: c.first.Method, Payload: orEmptyObject(c.first.Payload), Call: wire.CallContextToProto(call),
		})
	}
	out, sent, err := relay(key)
	switch {
	case !sent:
		t.Fatalf("%s.%s relayed on the direct channel: the plugin refused a call signed with the key it was configured with, or could not be reached at %s", c.first.Family, c.first.Method, ep.GetAddress())
	case err != nil:
		t.Fatalf("%s.%s relayed on the direct channel failed: %s", c.first.Family, c.first.Method, formatError(err))
	case !json.Valid(out):
		t.Fatalf("%s.%s relayed on the direct channel answered a result that is not JSON: %q", c.first.Family, c.first.Method, out)
	}
	if _, sent, _ := relay(direct.NewKey()); sent {
		t.Error("a relayed call signed with another key was not refused")
	}
}

// forged is signed with one bit of its MAC changed.
func forged(t checkT, signed []byte) []byte {
	var sg wophostv1.SignedGrant
	if err := proto.Unmarshal(signed, &sg); err != nil || len(sg.GetMac()) == 0 {
		t.Fatalf("decode the kit's own grant: %v", err)
	}
	sg.Mac[0] ^= 1
	b, err := proto.Marshal(&sg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// routedCount stands for the host: it counts the calls the channel did
// not take.
type routedCount struct{ n atomic.Int32 }

func (r *routedCount) CallRaw(context.Context, string, string, []byte) ([]byte, error) {
	r.n.Add(1)
	return nil, wop.Errorf(wop.CodeUnavailable, "sent through the host")
}
