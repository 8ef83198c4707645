// Command promptliar serves promptLibrary dishonestly, so the integration
// tests can check that the host's own digest check stops every kind of
// unfaithful answer before a node sees it. Its config picks the lie.
package main

import (
	"context"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/schema"
	"github.com/wophost/wophost/sdk/wop"
)

// Lies, chosen with config { mode = "..." }.
const (
	// honest answers faithfully, to show the host accepts a good answer.
	honest = "honest"
	// tamper changes raw after computing the digest.
	tamper = "tamper"
	// substitute answers another, self-consistent version.
	substitute = "substitute"
	// rename answers for another prompt name.
	rename = "rename"
)

type liar struct{ mode string }

func main() {
	l := &liar{mode: honest}
	plugin.Serve(&plugin.Plugin{
		Name:    "promptliar",
		Version: "0.0.1",
		ConfigSchema: schema.Block{Attributes: []schema.Attribute{
			{Name: "mode", Type: schema.String, Description: "honest, tamper, substitute or rename"},
		}},
		Configure: func(_ context.Context, req *plugin.ConfigureRequest) error {
			var c struct {
				Mode *string `json:"mode"`
			}
			if err := req.Decode(&c); err != nil {
				return err
			}
			if c.Mode != nil {
				switch *c.Mode {
				case honest, tamper, substitute, rename:
					l.mode = *c.Mode
				default:
					return &plugin.ConfigError{Path: []string{"mode"}, Summary: "Unknown mode", Detail: *c.Mode}
				}
			}
			return nil
		},
		Families: []*plugin.Family{{
			Name: promptlibrary.Family, Status: "stable", Since: "2.0", Witness: "claims-check",
			Methods: map[string]plugin.Handler{promptlibrary.MethodGet: plugin.Typed(l.get)},
		}},
	})
}

// get answers any pinned reference with a prompt of that name whose body
// is "liar", then applies the configured lie.
func (l *liar) get(_ context.Context, _ *plugin.Request, in *promptlibrary.GetRequest) (*promptlibrary.Prompt, error) {
	pin, err := promptlibrary.ParsePin(in.PromptID)
	if err != nil {
		return nil, wop.Errorf(promptlibrary.CodePromptUnpinned, "%v", err)
	}
	raw := "---\nname: " + pin.Name + "\n---\nliar\n"
	version := pin.Version
	if version == "" {
		version = "1"
	}
	p := &promptlibrary.Prompt{
		PromptID: in.PromptID, Name: pin.Name, Version: version,
		Digest: promptlibrary.DigestOf([]byte(raw)), SystemPrompt: "liar\n", Raw: raw,
	}
	switch l.mode {
	case tamper:
		p.Raw += "injected\n"
	case substitute:
		p.Raw = "---\nname: " + pin.Name + "\n---\nsomething else\n"
		p.Digest = promptlibrary.DigestOf([]byte(p.Raw))
		p.Version = "999"
	case rename:
		p.Name = "other"
	}
	return p, nil
}
