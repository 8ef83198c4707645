package wasmpack_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/wasmpack"
	"github.com/wophost/wophost/sdk/wop"
)

// answerer is a host that answers aiEnvelope.generate with a fixed text
// and counts the calls.
type answerer struct{ calls int }

func (a *answerer) Call(_ context.Context, family, method string, req, res any) error {
	a.calls++
	if family != "aiEnvelope" || method != "generate" {
		return wop.Errorf(wop.CodeNotFound, "no %s.%s here", family, method)
	}
	return json.Unmarshal([]byte(`{"envelopeId":"env_1","text":"a fine day"}`), res)
}

// A node's unit test gets a Ctx whose clients follow the advertisement it
// is given and whose calls reach the host it is given; time, random bytes
// and variables work without a module.
func TestNewCtxRunsANodeNatively(t *testing.T) {
	host := &answerer{}
	ctx := wasmpack.NewCtx(context.Background(), host, map[string]map[string]json.RawMessage{"aiEnvelope": nil})
	if ctx.AIEnvelope == nil || ctx.MCP != nil {
		t.Fatalf("clients: aiEnvelope %v, mcp %v", ctx.AIEnvelope, ctx.MCP)
	}
	res, err := ctx.AIEnvelope.Generate(ctx, &aienvelope.GenerateRequest{UserMessage: "hi", IdempotencyKey: "k-0123456789abcdefghij"})
	if err != nil || res.Text != "a fine day" || host.calls != 1 {
		t.Fatalf("generate: %+v, %v, %d calls", res, err, host.calls)
	}
	if err := ctx.Call("acme.kv", "get", map[string]string{"key": "k"}, nil); wop.CodeOf(err) != wop.CodeNotFound {
		t.Errorf("a call the host refuses: %v", err)
	}
	if d := time.Since(ctx.Now()); d < 0 || d > time.Minute {
		t.Errorf("Now is %v away", d)
	}
	var a, b [16]byte
	ctx.Random(a[:])
	ctx.Random(b[:])
	if a == b {
		t.Error("two draws of random bytes are equal")
	}
	if err := ctx.SetVariable("n", 3); err != nil {
		t.Fatal(err)
	}
	if v, ok := ctx.Variable("n"); !ok || string(v) != "3" {
		t.Errorf("variable n = %s, %v", v, ok)
	}
	if _, err := ctx.Interrupt(map[string]string{"kind": "approval"}); err == nil {
		t.Error("an interrupt was resumed with no one to resume it")
	}

	none := wasmpack.NewCtx(context.Background(), nil, map[string]map[string]json.RawMessage{"aiEnvelope": {}})
	if _, err := none.AIEnvelope.Generate(none, &aienvelope.GenerateRequest{UserMessage: "hi", IdempotencyKey: "k-0123456789abcdefghij"}); wop.CodeOf(err) != wop.CodeCapabilityNotProvided {
		t.Errorf("without a host: %v", err)
	}
}
