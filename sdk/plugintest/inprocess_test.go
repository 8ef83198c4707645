package plugintest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

type echoIn struct {
	Text string `json:"text"`
}

// inProcessPlugin is a plugin as a vendor's own test would build it: no
// binary, no main.
func inProcessPlugin() *plugin.Plugin {
	return &plugin.Plugin{
		Name: "inprocess", Version: "1.0.0",
		Families: []*plugin.Family{{
			Name: "test.echo", Status: wop.StatusExperimental, Since: "2.0", Until: "2099-12-31", Witness: wop.WitnessClaimsCheck,
			Codes: []string{"test.empty"},
			Methods: map[string]plugin.Handler{
				"echo": plugin.Typed(func(_ context.Context, _ *plugin.Request, in *echoIn) (*echoIn, error) {
					if in.Text == "" {
						return nil, wop.Errorf("test.empty", "text is empty")
					}
					return in, nil
				}),
			},
		}},
	}
}

// The whole kit runs against a plugin in the test's own process.
func TestRunInProcess(t *testing.T) {
	Run(t, Config{InProcess: inProcessPlugin(), Calls: []Call{{
		Family: "test.echo", Method: "echo", Payload: json.RawMessage(`{"text":"hi"}`),
		Check: func(t testing.TB, result json.RawMessage) {
			if string(result) != `{"text":"hi"}` {
				t.Errorf("echo = %s", result)
			}
		},
	}}})
}

// An in-process plugin is held to the same rules: a definition Serve would
// refuse fails the test, and a declared error code crosses intact.
func TestStartInProcess(t *testing.T) {
	p := Start(t, Config{InProcess: inProcessPlugin()})
	p.Configure(t, nil)
	_, err := p.Invoke(t.Context(), "test.echo", "echo", json.RawMessage(`{}`), wop.CallContext{})
	if wop.CodeOf(err) != "test.empty" {
		t.Errorf("declared code: %v", err)
	}
	bad := inProcessPlugin()
	bad.Families[0].Witness = ""
	if err := bad.Validate(); err == nil {
		t.Error("Validate accepted a record without witness")
	}
}
