package host

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/wop"
)

// seamInvoker stands in for a plugin: the builder never calls one.
type seamInvoker struct{ registry.Invoker }

// readyForSeams declares capability name, served by plugin, and makes it ready
// with families.
func readyForSeams(reg *registry.Registry, name, plugin string, families ...registry.Family) {
	reg.Declare(name, plugin)
	reg.Describe(name, plugin, "1.0.0", nil)
	reg.Ready(name, families, seamInvoker{})
}

// The manifest has one seam per side-effecting method of each advertised
// family, sorted, with the kind its family implies; pure methods (the
// contract's and a vendor's declaration) are no seams, nor are the
// methods of a family that is not advertised.
func TestEffectSeamsOf(t *testing.T) {
	reg := registry.New(registry.Implementation{Name: Name, Version: "1.2.3"})
	readyForSeams(reg, "ai", "wophost-aienvelope", registry.Family{Name: wop.FamilyAIEnvelope, Methods: []string{"generate"}})
	readyForSeams(reg, "prompts", "wophost-promptlib", registry.Family{Name: wop.FamilyPromptLibrary, Methods: []string{"get", "publish"}})
	readyForSeams(reg, "mcp", "wophost-mcp", registry.Family{Name: wop.FamilyMCP,
		Methods: []string{"callTool", "listTools", "readResource", "serverHealth"}})
	// Advertising agentRuntime implies agents.manifestRuntime, which the
	// host provides; a provided family has no methods and so no seams.
	reg.Provide(registry.Family{Name: wop.FamilyAgents, Facets: map[string]json.RawMessage{"manifestRuntime": json.RawMessage(`{}`)}})
	readyForSeams(reg, "agents", "wophost-agentruntime", registry.Family{Name: wop.FamilyAgentRuntime, Methods: []string{"spawn", "instances"}})
	readyForSeams(reg, "kv", "wophost-kv", registry.Family{Name: "acme.kv", Methods: []string{"delete", "get", "put"}, Pure: []string{"get"}})
	// Needs a family nobody serves: not advertised, so no seam.
	readyForSeams(reg, "orphan", "wophost-orphan", registry.Family{Name: "acme.orphan", Methods: []string{"poke"}, Needs: []string{"acme.none"}})

	m := EffectSeamsOf(reg)
	if m.ManifestVersion != "1" || m.Host != (EffectHost{Name: "wophost", Build: "1.2.3"}) {
		t.Fatalf("manifest head = %q %+v", m.ManifestVersion, m.Host)
	}
	var got []string
	for _, s := range m.Seams {
		got = append(got, s.Seam+" "+s.Kind)
		if !s.Guarded || !s.BranchReFires || !strings.Contains(s.GuardedBy, "invocation log") || s.Note == "" {
			t.Errorf("seam %+v: want guarded by the invocation log, re-fired by a branch, with a note", s)
		}
	}
	want := []string{
		"acme.kv.delete other", "acme.kv.put other",
		"agentRuntime.instances storage", "agentRuntime.spawn other",
		"aiEnvelope.generate provider-sdk",
		"mcp.callTool other",
		"promptLibrary.publish storage",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("seams:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := m.Seams[0].Note; !strings.Contains(n, `capability "kv" (plugin wophost-kv)`) || !strings.Contains(n, "no pure") {
		t.Errorf("vendor seam note %q: want the capability, the plugin and the missing pure declaration", n)
	}
	if n := m.Seams[5].Note; !strings.Contains(n, "MCP tools/call request") {
		t.Errorf("mcp seam note %q", n)
	}
	if n := m.Seams[2].Note; !strings.Contains(n, "operator-only listing") || !strings.Contains(n, `capability "agents"`) {
		t.Errorf("agentRuntime instances seam note %q", n)
	}
}

// With nothing advertised the manifest lists no seams as an empty array,
// not null.
func TestEffectSeamsOfNothing(t *testing.T) {
	b, err := json.Marshal(EffectSeamsOf(registry.New(registry.Implementation{Name: Name, Version: "dev"})))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"manifestVersion":"1","host":{"name":"wophost","build":"dev"},"seams":[]}`; string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
}
