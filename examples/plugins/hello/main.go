// Command acme-hello serves the vendor family acme.hello.
package main

import (
	"context"

	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/schema"
	"github.com/wophost/wophost/sdk/wop"
)

type greetRequest struct {
	Name string `json:"name"`
}

type greetResult struct {
	Greeting string `json:"greeting"`
}

func main() {
	plugin.Serve(newPlugin())
}

// newPlugin is the plugin main serves; a test can hand it to the
// conformance kit in process (plugintest.Config.InProcess).
func newPlugin() *plugin.Plugin {
	greeting := "Hello"
	return &plugin.Plugin{
		Name:    "acme-hello",
		Version: "0.1.0",
		ConfigSchema: schema.Block{Attributes: []schema.Attribute{
			{Name: "greeting", Type: schema.String, Description: `word to greet with (default "Hello")`},
		}},
		Configure: func(_ context.Context, req *plugin.ConfigureRequest) error {
			var c struct {
				Greeting *string `json:"greeting"`
			}
			if err := req.Decode(&c); err != nil {
				return err
			}
			if c.Greeting != nil {
				greeting = *c.Greeting
			}
			return nil
		},
		Families: []*plugin.Family{{
			Name: "acme.hello", Status: "experimental", Since: "2.0", Until: "2027-06-30", Witness: "claims-check",
			Methods: map[string]plugin.Handler{
				"greet": plugin.Typed(func(_ context.Context, _ *plugin.Request, in *greetRequest) (*greetResult, error) {
					if in.Name == "" {
						return nil, wop.Errorf(wop.CodeValidation, `field "name": must not be empty`)
					}
					return &greetResult{Greeting: greeting + ", " + in.Name + "!"}, nil
				}),
			},
		}},
	}
}
