package pack_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/wophost/wophost/sdk/pack"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

type typedIn struct {
	A int `json:"a"`
}

// A node's input and a plugin's request are decoded by the same rules: a
// body one side refuses, the other refuses too, with the same code.
func TestTypedNodeDecodesLikeTyped(t *testing.T) {
	node := pack.TypedNode(func(_ *pack.Ctx, in *typedIn) (int, error) { return in.A, nil })
	handler := plugin.Typed(func(_ context.Context, _ *plugin.Request, in *typedIn) (int, error) { return in.A, nil })
	for _, body := range []string{`{"a":1}`, `{"a":1} {"b":2}`, `{"b":2}`, `{"a":"x"}`, ``, `null`, `[`} {
		_, nodeErr := node(&pack.Ctx{Context: context.Background()}, json.RawMessage(body))
		_, plugErr := handler(context.Background(), &plugin.Request{Payload: json.RawMessage(body)})
		if wop.CodeOf(nodeErr) != wop.CodeOf(plugErr) || (nodeErr == nil) != (plugErr == nil) {
			t.Errorf("%q: node says %v, plugin says %v", body, nodeErr, plugErr)
		}
	}
}
