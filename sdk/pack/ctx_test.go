package pack_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/pack"
	"github.com/wophost/wophost/sdk/wop"
)

// fakeHost answers every generate with a fixed text, as a pack author's
// unit test would fake the host.
type fakeHost struct{ calls int }

func (h *fakeHost) Call(_ context.Context, family, method string, _, res any) error {
	h.calls++
	if family != aienvelope.Family || method != aienvelope.MethodGenerate {
		return wop.NotProvided("host." + family + "." + method)
	}
	r := res.(*aienvelope.GenerateResult)
	r.Status, r.Text = aienvelope.StatusCompleted, "hello"
	return nil
}

func describe(ctx *pack.Ctx, _ *struct{}) (string, error) {
	res, err := ctx.AIEnvelope.Generate(ctx, &aienvelope.GenerateRequest{EnvelopeType: "t", UserMessage: "hi", IdempotencyKey: "k"})
	if err != nil {
		return "", err
	}
	return res.Text, nil
}

// A node runs in a unit test with a Ctx the test builds: the clients of
// the families advertised call the test's fake host, the others are nil
// and refuse, and facets are those of the advertisement given.
func TestNewCtxRunsANodeAgainstAFakeHost(t *testing.T) {
	host := &fakeHost{}
	node := pack.TypedNode(describe)
	out, err := node(pack.NewCtx(context.Background(), host, map[string]map[string]json.RawMessage{aienvelope.Family: nil}), json.RawMessage(`{}`))
	if err != nil || out != "hello" || host.calls != 1 {
		t.Fatalf("node = %v, %v after %d calls", out, err, host.calls)
	}
	if _, err := node(pack.NewCtx(context.Background(), host, nil), json.RawMessage(`{}`)); wop.CodeOf(err) != wop.CodeCapabilityNotProvided {
		t.Errorf("without aiEnvelope advertised: %v", err)
	}
	// A nil facet record is an empty one for a pack: await is not
	// advertised, so an async generate is refused before it leaves.
	c := pack.NewCtx(context.Background(), host, map[string]map[string]json.RawMessage{aienvelope.Family: nil})
	if c.AIEnvelope.HasAwait() {
		t.Error("await advertised from a nil facet record")
	}
}

// A plugin calling back, which does not see the advertisement, builds its
// clients with nil facets: the host checks them, so the client lets every
// call through.
func TestNilFacetsLeaveTheCheckToTheHost(t *testing.T) {
	host := &fakeHost{}
	if c := aienvelope.NewClient(host, nil); !c.HasAwait() {
		t.Error("nil facets: await refused by the client")
	}
	if c := aienvelope.NewClient(host, map[string]json.RawMessage{}); c.HasAwait() {
		t.Error("an empty record: await let through")
	}
}

// The advertised argument is the advertisement as docs/writing-packs.md
// shows it: families by name (a vendor family by its whole name, not
// under "extensions"), each to its facets' JSON; a family left out has no
// client; NewCtx keeps a copy, so the test's map may change afterwards.
func TestNewCtxAdvertisedShape(t *testing.T) {
	advertised := map[string]map[string]json.RawMessage{
		aienvelope.Family: {"await": json.RawMessage(`true`)},
		"acme.kv":         {},
	}
	c := pack.NewCtx(context.Background(), nil, advertised)
	delete(advertised, "acme.kv")
	if !c.Advertised("acme.kv") || !c.Advertised(aienvelope.Family) || c.Advertised("extensions") || c.Advertised("promptLibrary") {
		t.Error("Advertised does not follow the map's families")
	}
	if v, ok := c.Facet(aienvelope.Family, "await"); !ok || string(v) != "true" || !c.AIEnvelope.HasAwait() {
		t.Errorf("Facet(aiEnvelope, await) = %s, %v; HasAwait %v", v, ok, c.AIEnvelope.HasAwait())
	}
	if _, ok := c.Facet("acme.kv", "status"); ok {
		t.Error("a record field taken for a facet")
	}
	if c.PromptLibrary != nil || c.MCP != nil || c.AgentRuntime != nil {
		t.Error("a client for a family left out")
	}
	if err := c.Call("acme.kv", "get", map[string]string{}, nil); wop.CodeOf(err) != wop.CodeCapabilityNotProvided {
		t.Errorf("a call with a nil host: %v, want capability_not_provided", err)
	}
	if none := pack.NewCtx(context.Background(), nil, nil); none.AIEnvelope != nil || none.Advertised(aienvelope.Family) {
		t.Error("a nil map advertises something")
	}
}
