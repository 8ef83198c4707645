package plugin

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/schema"
)

func constrainedPlugin(configured *bool) *Plugin {
	return &Plugin{
		Name: "constrained", Version: "1.0.0",
		ConfigSchema: schema.Block{
			Attributes: []schema.Attribute{{Name: "max_rounds", Type: schema.Number, Whole: true, Min: schema.Bound(1), Max: schema.Bound(16)}},
			Blocks: []schema.NestedBlock{{TypeName: "server", Nesting: schema.NestingMap, Block: schema.Block{
				Attributes: []schema.Attribute{{Name: "timeout", Type: schema.String, Duration: true}}}}},
		},
		Configure: func(context.Context, *ConfigureRequest) error { *configured = true; return nil },
		Families: []*Family{{Name: "test.constrained", Status: "stable", Since: "2.0", Witness: "claims-check",
			Methods: map[string]Handler{"noop": func(context.Context, *Request) (any, error) { return nil, nil }}}},
	}
}

// A config that did not come through a host is held to the schema's
// constraints before Configure sees it, with the host's words.
func TestConfigureChecksSchemaConstraints(t *testing.T) {
	var configured bool
	s := newServer(constrainedPlugin(&configured), nil, hclog.NewNullLogger(), wire.DefaultMaxMessageBytes, noop.NewTracerProvider().Tracer("test"))
	resp, err := s.Configure(context.Background(), &wophostv1.ConfigureRequest{
		Config: []byte(`{"max_rounds": 0.5, "server": {"a": {"timeout": "1s"}, "b": {"timeout": "0s"}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range resp.GetDiagnostics() {
		got = append(got, strings.Join(d.GetPath(), ".")+": "+d.GetDetail())
	}
	want := []string{
		"max_rounds: max_rounds must be a whole number from 1 to 16, got 0.5.",
		`server.b.timeout: timeout must be a duration such as "500ms" or "1m30s" greater than zero, got "0s".`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if configured {
		t.Error("Configure ran on a config outside the schema's constraints")
	}
	resp, err = s.Configure(context.Background(), &wophostv1.ConfigureRequest{Config: []byte(`{"max_rounds": 16, "server": null}`)})
	if err != nil || len(resp.GetDiagnostics()) != 0 || !configured {
		t.Fatalf("valid config: %v, %v, configured %v", resp.GetDiagnostics(), err, configured)
	}
}

// A schema whose constraints do not fit their types is a bug in the
// plugin, refused before it serves.
func TestValidateRefusesBadConstraints(t *testing.T) {
	var configured bool
	p := constrainedPlugin(&configured)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	p.ConfigSchema.Blocks[0].Block.Attributes[0].Whole = true
	err := p.Validate()
	if err == nil || !strings.Contains(err.Error(), `"server.timeout"`) || !strings.Contains(err.Error(), "whole, min and max apply") {
		t.Fatalf("validate = %v", err)
	}
}

// A family record a client would reject stops Serve, naming the family.
func TestValidateRefusesBadRecords(t *testing.T) {
	var configured bool
	for want, spoil := range map[string]func(*Family){
		`status "beta": must be one of`: func(f *Family) { f.Status = "beta" },
		"until: required":               func(f *Family) { f.Status = "experimental" },
		`witness "": must be one of`:    func(f *Family) { f.Witness = "" },
		`since "": must be`:             func(f *Family) { f.Since = "" },
	} {
		p := constrainedPlugin(&configured)
		spoil(p.Families[0])
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), `family "test.constrained"`) || !strings.Contains(err.Error(), want) {
			t.Errorf("validate = %v, want it to contain %q", err, want)
		}
	}
}
