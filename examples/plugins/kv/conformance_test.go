package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wophost/wophost/examples/plugins/kv/kvapi"
	"github.com/wophost/wophost/sdk/plugintest"
)

// The kv plugin passes the protocol conformance kit, run against the built
// binary exactly as a vendor would run it against theirs.
func TestConformance(t *testing.T) {
	binary := filepath.Join(t.TempDir(), "wophost-kv")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	plugintest.Run(t, plugintest.Config{
		Binary: binary,
		Config: json.RawMessage(`{"file":"kv.db","max_value_bytes":1024}`),
		Calls: []plugintest.Call{
			{Family: "acme.kv", Method: "put", Payload: json.RawMessage(`{"key":"k","value":"v"}`)},
			{Family: "acme.kv", Method: "get", Payload: json.RawMessage(`{"key":"k"}`), Check: func(t testing.TB, res json.RawMessage) {
				var got struct{ Value string }
				if err := json.Unmarshal(res, &got); err != nil || got.Value != "v" {
					t.Errorf("get after put = %s, %v", res, err)
				}
			}},
			// The family's vendor codes follow OpenWOP's grammar.
			{Family: "acme.kv", Method: "get", Payload: json.RawMessage(`{"key":"missing"}`), WantCode: kvapi.CodeKeyNotFound},
			{Family: "acme.kv", Method: "put", Payload: json.RawMessage(`{"key":"big","value":"` + strings.Repeat("x", 2000) + `"}`), WantCode: kvapi.CodeValueTooLarge},
		},
	})
}

// The plugin declares get pure and only get: put and delete change the
// store, and a replay must answer them from the run's log.
func TestDescribeDeclaresGetPure(t *testing.T) {
	p := plugintest.Start(t, plugintest.Config{InProcess: newPlugin()})
	d := p.Describe(t)
	if len(d.Families) != 1 || !slices.Equal(d.Families[0].PureMethods, []string{kvapi.MethodGet}) {
		t.Fatalf("Describe families = %+v; want acme.kv with pure_methods [get]", d.Families)
	}
}
