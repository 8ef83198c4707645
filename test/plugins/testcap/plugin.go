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

type testConfig struct {
	FailConfigure *bool   `json:"fail_configure"`
	Greeting      *string `json:"greeting"`
	Token         *string `json:"token"`
	// WaitFor names a file: until it exists Configure answers the
	// retryable unavailable, as a plugin whose database is down does.
	WaitFor *string `json:"wait_for"`
	// ExitConfigure makes Configure write a reason to stderr and exit
	// with status 4, as a plugin whose licence check fails does.
	ExitConfigure *bool `json:"exit_configure"`
}

type sleepRequest struct {
	MS     int    `json:"ms"`
	Marker string `json:"marker,omitempty"`
	// Started, when set, is a file written as the call reaches the plugin.
	Started string `json:"started,omitempty"`
}

type deadlines struct {
	Context     string `json:"context,omitempty"`
	CallContext string `json:"callContext,omitempty"`
	Depth       int    `json:"depth"`
	RunID       string `json:"runId"`
	TypeID      string `json:"typeId"`
}

func newPlugin() *plugin.Plugin {
	greeting := "hello"
	configure := func(_ context.Context, req *plugin.ConfigureRequest) error {
		var c testConfig
		if err := req.Decode(&c); err != nil {
			return err
		}
		if c.ExitConfigure != nil && *c.ExitConfigure {
			// On the process's own stderr, as a crash's words are:
			// go-plugin points os.Stderr at a stream that an exit may cut.
			_, _ = os.NewFile(2, "stderr").WriteString("testcap: the licence server refused key TC-0000\n")
			os.Exit(4)
		}
		if c.WaitFor != nil {
			if _, err := os.Stat(*c.WaitFor); err != nil {
				return wop.Errorf(wop.CodeUnavailable, "%s is not there yet", *c.WaitFor).WithRetryable(true)
			}
		}
		if c.FailConfigure != nil && *c.FailConfigure {
			return &plugin.ConfigError{Path: []string{"fail_configure"}, Summary: "Configuration refused", Detail: "fail_configure is set"}
		}
		if c.Greeting != nil {
			greeting = *c.Greeting
		}
		return nil
	}
	methods := func(family string) map[string]plugin.Handler {
		return map[string]plugin.Handler{
			"echo": func(_ context.Context, req *plugin.Request) (any, error) {
				return req.Payload, nil
			},
			// shout is echo held to a facet rule of test.echo's: a
			// request that sets "loud" needs the echo facet.
			"shout": plugin.Typed(func(_ context.Context, _ *plugin.Request, in *struct {
				Loud bool   `json:"loud"`
				Text string `json:"text"`
			}) (any, error) {
				return map[string]any{"text": in.Text, "loud": in.Loud}, nil
			}),
			"greet": func(context.Context, *plugin.Request) (any, error) {
				return map[string]string{"greeting": greeting, "family": family}, nil
			},
			"sleep": plugin.Typed(func(ctx context.Context, _ *plugin.Request, in *sleepRequest) (any, error) {
				if in.Started != "" {
					if err := os.WriteFile(in.Started, []byte("started"), 0o600); err != nil {
						return nil, err
					}
				}
				select {
				case <-time.After(time.Duration(in.MS) * time.Millisecond):
					return map[string]bool{"slept": true}, nil
				case <-ctx.Done():
					if in.Marker != "" {
						_ = os.WriteFile(in.Marker, []byte(ctx.Err().Error()), 0o600)
					}
					return nil, ctx.Err()
				}
			}),
			"deadline": func(ctx context.Context, req *plugin.Request) (any, error) {
				d := deadlines{Depth: req.Call.Depth, RunID: req.Call.RunID, TypeID: req.Call.TypeID}
				if t, ok := ctx.Deadline(); ok {
					d.Context = t.UTC().Format(time.RFC3339Nano)
				}
				if !req.Call.Deadline.IsZero() {
					d.CallContext = req.Call.Deadline.UTC().Format(time.RFC3339Nano)
				}
				return d, nil
			},
			"fail": func(context.Context, *plugin.Request) (any, error) {
				return nil, wop.Errorf("test.boom", "the plugin failed on purpose").
					WithRetryable(true).
					WithDetails(map[string]any{"n": 42, "nested": map[string]any{"list": []int{1, 2, 3}}, "text": "ünïcode"})
			},
			// log writes one line through the request's logger, which the
			// host re-emits with the plugin's name.
			"log": func(_ context.Context, req *plugin.Request) (any, error) {
				req.Logger.Info("handled a log call")
				return map[string]bool{"logged": true}, nil
			},
			// debug writes one line at debug level, which the host's log
			// holds only at a level of debug or below.
			"debug": func(_ context.Context, req *plugin.Request) (any, error) {
				req.Logger.Debug("handled a debug call")
				return map[string]bool{"logged": true}, nil
			},
			// warn writes the same warning on every call, as a plugin
			// whose upstream is down does.
			"warn": func(_ context.Context, req *plugin.Request) (any, error) {
				req.Logger.Warn("the upstream refused the call", "error", "connection refused")
				return map[string]bool{"warned": true}, nil
			},
			"pid": func(context.Context, *plugin.Request) (any, error) {
				return map[string]int{"pid": os.Getpid()}, nil
			},
			"exit": func(context.Context, *plugin.Request) (any, error) {
				// Its last words, which the host reports with the crash, on
				// the process's own stderr as a crash's are (go-plugin
				// replaces os.Stderr with a pipe to the host's log).
				_, _ = os.NewFile(2, "stderr").WriteString("testcap: exiting with status 7 on request\n")
				os.Exit(7)
				return nil, nil
			},
			"panic": func(context.Context, *plugin.Request) (any, error) {
				panic("the plugin panicked on purpose")
			},
			// callback calls the host's test.echo.callback again, so each
			// hop adds one to the depth until the host refuses.
			"callback": func(ctx context.Context, req *plugin.Request) (any, error) {
				var out json.RawMessage
				if err := req.Host.Call(ctx, "test.echo", "callback", json.RawMessage(`{}`), &out); err != nil {
					return nil, err
				}
				return out, nil
			},
			"big": plugin.Typed(func(_ context.Context, _ *plugin.Request, in *struct {
				Bytes int `json:"bytes"`
			}) (any, error) {
				b := make([]byte, in.Bytes)
				for i := range b {
					b[i] = 'x'
				}
				return map[string]string{"data": string(b)}, nil
			}),
		}
	}
	return &plugin.Plugin{
		Name:    "testcap",
		Version: "1.2.3",
		ConfigSchema: schema.Block{Attributes: []schema.Attribute{
			{Name: "fail_configure", Type: schema.Bool},
			{Name: "greeting", Type: schema.String},
			{Name: "token", Type: schema.String, Sensitive: true},
			{Name: "wait_for", Type: schema.String},
			{Name: "exit_configure", Type: schema.Bool},
		}},
		Configure: configure,
		Families: []*plugin.Family{
			{
				Name: "test.echo", Status: "experimental", Since: "2.0", Until: "2027-06-30", Witness: "claims-check",
				Methods:    methods("test.echo"),
				Codes:      []string{"test.boom"},
				Facets:     func() map[string]any { return map[string]any{"sleep": map[string]int{"maxMs": 60000}, "echo": nil} },
				Uses:       []string{"test.echo"},
				FacetRules: []wop.FacetRule{{Method: "shout", Facet: "echo", When: "loud"}},
			},
			{
				Name: "test.other", Status: "experimental", Since: "2.0", Until: "2027-06-30", Witness: "claims-check",
				Methods: methods("test.other"),
				Codes:   []string{"test.boom"},
			},
		},
	}
}
