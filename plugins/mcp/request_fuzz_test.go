package main

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// FuzzRequest sends arbitrary payloads to each method of the mcp family
// as the plugin decodes them from a ctx call. The plugin has no server
// configured, so after decoding a request can only be refused: a
// malformed payload with validation_error, a well-formed one with
// not_found naming the server. Nothing may panic or reach a network.
func FuzzRequest(f *testing.F) {
	methods := []string{mcp.MethodCallTool, mcp.MethodListTools, mcp.MethodReadResource, mcp.MethodServerHealth}
	f.Add(uint8(0), []byte(`{"serverId":"toolbox","name":"add","arguments":{"a":1,"b":2}}`))
	f.Add(uint8(1), []byte(`{"serverId":"toolbox","cursor":"c1"}`))
	f.Add(uint8(2), []byte(`{"serverId":"toolbox","uri":"file:///etc/passwd"}`))
	f.Add(uint8(3), []byte(`{"serverId":"toolbox"}`))
	f.Add(uint8(0), []byte(`{"serverId":"x","name":"add","arguments":[1]} trailing`))
	f.Add(uint8(0), []byte(`{"serverId":"x","unknown":true}`))
	f.Add(uint8(1), []byte(`null`))
	p := newPlugin()
	fam := p.Families[0]
	f.Fuzz(func(t *testing.T, which uint8, payload []byte) {
		method := methods[int(which)%len(methods)]
		h := fam.Methods[method]
		out, err := h(context.Background(), &plugin.Request{Payload: payload})
		if err == nil {
			t.Fatalf("%s accepted %q with no server configured: %v", method, payload, out)
		}
		var we *wop.Error
		if !errors.As(err, &we) {
			t.Fatalf("%s: error %v (%T) is not a *wop.Error", method, err, err)
		}
		if !slices.Contains([]string{wop.CodeValidation, wop.CodeNotFound}, we.Code) || we.Message == "" {
			t.Fatalf("%s: refusal %+v, want validation_error or not_found with a message", method, we)
		}
	})
}
