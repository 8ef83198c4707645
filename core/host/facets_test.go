package host

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/hostwire"
	"github.com/wophost/wophost/sdk/wop"
	"github.com/wophost/wophost/test/testbin"
)

// badPluginPkg is the conformance kit's bad plugin, written against the
// wire protocol without the SDK, which would refuse its facets itself.
const badPluginPkg = "github.com/wophost/wophost/sdk/plugintest/internal/badplugin"

// Facets that would make an invalid record of a core family are refused
// naming the plugin, the family and the facet, as selectFamilies refuses
// an invalid record; a vendor family's open record takes any facets, and
// the host's own agents record passes.
func TestCheckFacets(t *testing.T) {
	parse := func(s string) map[string]json.RawMessage {
		var f map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	families := []loader.FamilyDescription{{Name: wop.FamilyAIEnvelope}, {Name: "acme.kv"}}
	ok := map[string]map[string]json.RawMessage{wop.FamilyAIEnvelope: parse(`{"await":true}`), "acme.kv": parse(`{"await":{}}`)}
	if err := checkFacets("p", families, ok); err != nil {
		t.Fatal(err)
	}
	bad := map[string]map[string]json.RawMessage{wop.FamilyAIEnvelope: parse(`{"await":{}}`), "acme.kv": parse(`{}`)}
	err := checkFacets("p", families, bad)
	if err == nil || err.Error() != `plugin p describes family "aiEnvelope" with an invalid record: facet "await": must be the boolean true (leave the facet out when await is not served), got an object` {
		t.Fatalf("await {}: %v", err)
	}
	// An mcp family that reports no facets lacks the required ones.
	err = checkFacets("p", []loader.FamilyDescription{{Name: wop.FamilyMCP}}, nil)
	if err == nil || !strings.Contains(err.Error(), `plugin p describes family "mcp" with an invalid record: facet "revisions": required`) {
		t.Fatalf("mcp without facets: %v", err)
	}
	for _, f := range wop.CoreFamilies() {
		if err := hostwire.CheckFacets(f, parse(`{"plugintest":true}`)); err == nil {
			t.Errorf("%s takes an unknown facet", f)
		}
	}
	if err := hostwire.CheckFacets(wop.FamilyAgents, parse(`{"`+agentruntime.FacetManifestRuntime+`":`+manifestRuntimeFacet+`}`)); err != nil {
		t.Errorf("the host's agents record: %v", err)
	}
}

// A plugin whose Configure reports facets that make an invalid record of
// a core family fails in phase configured, with the family and the facet
// in its last error (what `host plugins` shows), and the family is not
// advertised; the valid capability beside it is. The bad plugin speaks
// the wire protocol itself, as a plugin in another language would.
func TestHostRefusesInvalidFacets(t *testing.T) {
	bad, err := testbin.NewCache(t.TempDir()).Binary(badPluginPkg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, aiBreak, mcpBreak, failed, want string
	}{
		{"aiEnvelope", "ai-await-facet", "none", "ai",
			`plugin badplugin describes family "aiEnvelope" with an invalid record: facet "await": must be the boolean true (leave the facet out when await is not served), got an object`},
		{"mcp", "none", "mcp-advertised", "mcp",
			`plugin badplugin describes family "mcp" with an invalid record: facet "mrtr": maxRounds must be an integer from 1 to 16, got the number 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "host.hcl")
			text := `host {
  state_dir = "` + filepath.Join(dir, "state") + `"
}
capability "ai" {
  plugin = "` + bad + `"
  env    = { BADPLUGIN_FAMILY = "aiEnvelope", BADPLUGIN_BREAK = "` + tc.aiBreak + `" }
  config { async = true }
}
capability "mcp" {
  plugin = "` + bad + `"
  env    = { BADPLUGIN_FAMILY = "mcp", BADPLUGIN_BREAK = "` + tc.mcpBreak + `" }
}
`
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, ldr, diags := config.Load(path)
			if diags.HasErrors() {
				t.Fatalf("config: %s", config.FormatDiagnostics(diags))
			}
			h := New(cfg, ldr, hclog.NewNullLogger(), "test")
			rep := h.Start(context.Background())
			t.Cleanup(h.Close)
			if !strings.Contains(config.FormatDiagnostics(rep.Capabilities), tc.want) {
				t.Errorf("start diagnostics %q do not say %q", config.FormatDiagnostics(rep.Capabilities), tc.want)
			}
			families := map[string]string{"ai": wop.FamilyAIEnvelope, "mcp": wop.FamilyMCP}
			for name, family := range families {
				r := record(t, h, name)
				if name == tc.failed {
					if r.State != registry.StateFailed || r.FailedPhase != registry.StateConfigured || r.LastError != tc.want {
						t.Errorf("%s: state %s in phase %q, last error %q; want failed in phase configured with %q", name, r.State, r.FailedPhase, r.LastError, tc.want)
					}
					if h.reg.Has(family, "") || strings.Contains(string(h.reg.Document()), `"`+family+`"`) {
						t.Errorf("%s is advertised: %s", family, h.reg.Document())
					}
					continue
				}
				if r.State != registry.StateReady || !h.reg.Has(family, "") {
					t.Errorf("%s: state %s, last error %q, document %s", name, r.State, r.LastError, h.reg.Document())
				}
			}
		})
	}
}
