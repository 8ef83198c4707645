// Command testplugin is the plugin the plugintest kit tests itself
// against. It serves the family test.echo. With PLUGINTEST_MODE=bad in its
// environment it describes itself and its config schema wrongly, so that
// the kit's checks have something to catch.
package main

import (
	"context"
	"encoding/json"
	"os"
	"time"

	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/schema"
	"github.com/wophost/wophost/sdk/wop"
)

type config struct {
	Fail bool `json:"fail"`
}

type sleepRequest struct {
	Ms int `json:"ms"`
}

func main() {
	p := newPlugin()
	if os.Getenv("PLUGINTEST_MODE") == "bad" {
		spoil(p)
	}
	plugin.Serve(p)
}

func newPlugin() *plugin.Plugin {
	return &plugin.Plugin{
		Name:    "testplugin",
		Version: "0.0.1",
		ConfigSchema: schema.Block{Attributes: []schema.Attribute{
			{Name: "fail", Type: schema.Bool, Description: "refuse the config"},
		}},
		Configure: configure,
		Families: []*plugin.Family{{
			Name:    "test.echo",
			Status:  wop.StatusExperimental,
			Since:   "2.0",
			Until:   "2099-12-31",
			Witness: wop.WitnessClaimsCheck,
			Uses:    []string{"test.host"},
			Methods: map[string]plugin.Handler{
				"echo":     echo,
				"sleep":    plugin.Typed(sleep),
				"callback": callback,
				// callbackDetached calls back from a context of its own
				// making that leaves out the run token: the kit must refuse it.
				"callbackDetached": callbackDetached,
			},
			Facets: func() map[string]any { return map[string]any{"echo": nil} },
		}},
	}
}

// spoil breaks the rules the kit checks but that plugin.Serve lets pass
// (Serve refuses a family record OpenWOP would, so the record stays).
func spoil(p *plugin.Plugin) {
	p.Version = ""
	p.Families[0].Name = "Test_Echo"
	p.ConfigSchema = schema.Block{
		Attributes: []schema.Attribute{{Name: "a", Type: schema.String}, {Name: "a"}},
		Blocks:     []schema.NestedBlock{{TypeName: "b", Nesting: "set"}},
	}
}

func configure(_ context.Context, req *plugin.ConfigureRequest) error {
	var c config
	if err := req.Decode(&c); err != nil {
		return err
	}
	if c.Fail {
		return &plugin.ConfigError{Path: []string{"fail"}, Summary: "Refused", Detail: "fail is true"}
	}
	return nil
}

// echo returns its payload, which must be JSON.
func echo(_ context.Context, req *plugin.Request) (any, error) {
	var v any
	if err := req.Decode(&v); err != nil {
		return nil, err
	}
	return req.Payload, nil
}

// sleep waits for the given time or until the call ends.
func sleep(ctx context.Context, _ *plugin.Request, in *sleepRequest) (map[string]int, error) {
	t := time.NewTimer(time.Duration(in.Ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return map[string]int{"slept": in.Ms}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// callback forwards its payload to the host as test.host.ping.
func callback(ctx context.Context, req *plugin.Request) (any, error) {
	var out json.RawMessage
	if err := req.Host.Call(ctx, "test.host", "ping", req.Payload, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// callbackDetached forwards its payload like callback, from a call context
// it builds by hand with the run id but without the run token, as a
// careless plugin would.
func callbackDetached(ctx context.Context, req *plugin.Request) (any, error) {
	detached := wop.WithCallContext(context.WithoutCancel(ctx), wop.CallContext{RunID: req.Call.RunID, Depth: req.Call.Depth})
	var out json.RawMessage
	if err := req.Host.Call(detached, "test.host", "ping", req.Payload, &out); err != nil {
		return nil, err
	}
	return out, nil
}
