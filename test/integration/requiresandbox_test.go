package integration

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/sandbox"
)

// A host that cannot contain its packs (here: embedded without a
// launcher) says so and still runs them, unless require_sandbox is set:
// then the pack is refused before it starts, naming every rule and why,
// and the host is not ready.
func TestRequireSandboxRefusesWhatCannotBeEnforced(t *testing.T) {
	start := func(t *testing.T, require bool) *host.Host {
		t.Helper()
		req := "false"
		if require {
			req = "true"
		}
		cfgPath := writeConfig(t, `
host {
  plugin_dir      = "BIN"
  require_sandbox = `+req+`
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" { path = "`+probePack(t)+`" }
`)
		cfg, ldr, diags := config.Load(cfgPath)
		if diags.HasErrors() {
			t.Fatalf("config: %s", config.FormatDiagnostics(diags))
		}
		h := host.New(cfg, ldr, hclog.NewNullLogger(), "test")
		h.Start(context.Background())
		t.Cleanup(h.Close)
		return h
	}
	t.Run("not required", func(t *testing.T) {
		h := start(t, false)
		p := h.Packs()[0]
		// Degraded: the probe's optional peers are not served here.
		if p.State != host.PackReady && p.State != host.PackDegraded {
			t.Fatalf("pack %s: %s (%s), want admitted", p.Name, p.State, p.Error)
		}
		if p.Sandbox == nil || p.Sandbox.Contained || len(p.Sandbox.NotEnforced) != len(sandbox.Rules()) {
			t.Fatalf("pack sandbox %+v: want uncontained with every rule not enforced", p.Sandbox)
		}
		if err := h.Ready(); err != nil {
			t.Fatalf("Ready: %v, want ready: the rules not enforced are said, not held against the host", err)
		}
	})
	t.Run("required", func(t *testing.T) {
		h := start(t, true)
		p := h.Packs()[0]
		if p.State != host.PackRefused || !strings.Contains(p.Error, "pack_runtime_requirement_unmet") || !strings.Contains(p.Error, "require_sandbox") {
			t.Fatalf("pack %s: %s (%s), want refused with pack_runtime_requirement_unmet naming require_sandbox", p.Name, p.State, p.Error)
		}
		for _, r := range sandbox.Rules() {
			if !strings.Contains(p.Error, r+" (") {
				t.Errorf("the refusal does not name rule %s: %s", r, p.Error)
			}
		}
		var nr *host.NotReadyError
		if err := h.Ready(); !errors.As(err, &nr) || nr.Packs[p.Name] != host.PackRefused {
			t.Fatalf("Ready: %v, want not ready naming the refused pack", err)
		}
	})
}
