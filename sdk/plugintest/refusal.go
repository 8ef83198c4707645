package plugintest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/internal/direct"
	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// Who the kit's grants are for: the node a host would grant.
const (
	grantPack   = "plugintest"
	grantTypeID = "plugintest.node"
)

// refusalText is the text of the rule Protocol/DirectChannel/Refusal.
const refusalText = "On the direct channel, every call of the admission table (admission.Refusals) is refused with the code and message the host gives it: an undeclared family, a depth, size or deadline over its bound, a facet rule's facet undeclared (a member-decided one in every spelling of its member), an operator-only method; a row per rule, for the first sample call's family and each other family with facet rules or operator-only methods."

// refusalCalls are the sample calls the refusal table is made from: the
// first sample call, and for each other family the plugin describes
// whose rules ask for a facet or keep methods to the operator, its first
// sample call (one that succeeds if there is one).
func (c *protocolChecks) refusalCalls() []Call {
	out := []Call{c.first}
	for _, call := range c.cfg.Calls {
		if call.Family == c.first.Family {
			continue
		}
		r := c.rules[call.Family]
		if len(r.Facets) == 0 && len(r.OperatorOnly) == 0 {
			continue
		}
		i := slices.IndexFunc(out, func(o Call) bool { return o.Family == call.Family })
		switch {
		case i < 0:
			out = append(out, call)
		case out[i].WantCode != "" && call.WantCode == "":
			out[i] = call
		}
	}
	return out
}

// refusals holds the plugin's direct channel to the admission table: a
// rule per row of admission.Refusals for each of refusalCalls, named by
// the row ("Refusal/undeclared family"; a family other than the first
// sample call's is named before it, "Refusal/mcp/undeclared family").
// Each row is sent on the channel under a grant of its own run that
// declares what the row declares and carries its depth, limits and
// deadline, and must be answered with the error Admit gives it: the
// same code and message as the host's.
func (c *protocolChecks) refusals(t checkT, key []byte, ep *wophostv1.DirectChannelEndpoint) {
	pool := direct.NewPool(wire.DefaultMaxMessageBytes)
	defer pool.Close()
	now := time.Now()
	n := 0
	for i, call := range c.refusalCalls() {
		rules := c.rules[call.Family]
		prefix := ""
		if i > 0 {
			prefix = call.Family + "/"
		}
		for _, row := range admission.Refusals(admission.NodeCaller(grantPack, grantTypeID), call.Family, call.Method, orEmptyObject(call.Payload), rules, now) {
			_, want := admission.Admit(row.Call, row.Limits, row.Allows, rules, now)
			if want == nil {
				// The table's rows are refused by construction.
				t.Fatalf("admission.Admit admits the row %q of the refusal table", row.Rule)
			}
			n++
			run := fmt.Sprintf("%s-refusal-%d", directRunID, n)
			text := fmt.Sprintf("%s.%s on the direct channel (%s) is refused as the host refuses it: code %s, %q.", row.Call.Family, row.Call.Method, row.Rule, want.Code, want.Message)
			t.Run(prefix+row.Rule, text, func(t checkT) { c.refusal(t, pool, key, ep, run, row, want) })
		}
	}
}

// refusal sends row on the channel under a grant of run and checks the
// answer is want.
func (c *protocolChecks) refusal(t checkT, pool *direct.Pool, key []byte, ep *wophostv1.DirectChannelEndpoint, run string, row admission.Refusal, want *wop.Error) {
	g := &wophostv1.Grant{
		RunId: run, NodeId: "plugintest-node", TypeId: grantTypeID, Pack: grantPack,
		DeadlineUnixNano: row.Call.Deadline.UnixNano(), Depth: uint32(row.Call.Depth), DepthLimit: uint32(row.Limits.DepthLimit),
		MaxBytes: row.Limits.MaxBytes, RunToken: c.p.tokens.bind(run, wop.RunToken{}).Reveal(), Log: true,
		Families: direct.GrantedFamilies(row.Declared),
	}
	signed, err := direct.Sign(key, g)
	if err != nil {
		t.Fatal(err)
	}
	r := &routedCount{}
	caller := direct.NewCaller(r, pool, []*wophostv1.DirectChannelOffer{{Families: []string{row.Call.Family}, Endpoint: ep, Grant: signed}}, noop.NewTracerProvider().Tracer(""), nil)
	ctx, cancel := context.WithTimeout(t.Context(), rpcTimeout)
	defer cancel()
	out, err := caller.CallRaw(ctx, row.Call.Family, row.Call.Method, row.Call.Payload)
	what := fmt.Sprintf("%s.%s with payload %s, depth %d of %d, a %d-byte limit, declaring %v", row.Call.Family, row.Call.Method, row.Call.Payload, row.Call.Depth, row.Limits.DepthLimit, row.Limits.MaxBytes, row.Declared)
	switch {
	case r.n.Load() > 0:
		t.Fatalf("%s: the plugin refused the grant, or could not be reached at %s, so the call went through the host; want it answered on the channel with code %s", what, ep.GetAddress(), want.Code)
	case err == nil:
		t.Fatalf("%s succeeded on the direct channel with %s; want it refused with code %s, %q, as the host refuses it (%s)", what, out, want.Code, want.Message, row.Rule)
	}
	got := wop.AsError(err)
	if got.Code != want.Code || got.Message != want.Message {
		t.Errorf("%s on the direct channel: got code %q, %q; want code %s, %q, as the host refuses it (%s)", what, got.Code, got.Message, want.Code, want.Message, row.Rule)
	}
}
