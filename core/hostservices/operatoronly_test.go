package hostservices

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/agents"
	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/wop"
)

// The promptLibrary methods that manage the store are the operator's
// alone: a pack, a plugin and an agent (through its runtime) that may all
// call promptLibrary get are refused publish and the rest with
// capability_not_declared, and the plugin is never asked. The operator's
// own call goes through.
func TestPromptManagementIsOperatorOnly(t *testing.T) {
	f := newAgentFixture(t)
	reg := registry.New(registry.Implementation{Name: "wophost", Version: "test"})
	reg.Declare("prompts", "wophost-promptlib")
	reg.Ready("prompts", []registry.Family{{Name: wop.FamilyPromptLibrary, Methods: []string{
		promptlibrary.MethodGet, promptlibrary.MethodPublish, promptlibrary.MethodList, promptlibrary.MethodVersions,
		promptlibrary.MethodResolve, promptlibrary.MethodVerify, promptlibrary.MethodReindex,
	}}}, f.inv)
	f.router = dispatch.NewRouter(reg, 8, 1<<20)
	f.run.Pack = "demo.pack"
	f.run.Allowed = allowAll

	pack := ForPack(f.router, f.runs, hclog.NewNullLogger(), "demo.pack")
	plugin := ForPlugin(f.router, f.runs, hclog.NewNullLogger(), "other", allowAll)
	rt := ForPlugin(f.router, f.runs, hclog.NewNullLogger(), "agentrt", allowAll).ForAgents(f.lookup)
	callers := []struct {
		name, claim string
		s           *Server
	}{
		{"pack", "pack:demo.pack", pack},
		{"plugin", "plugin:other", plugin},
		{"agent", "agent:agt_1@" + f.digest, rt},
	}
	for _, c := range callers {
		if err := f.call(t, c.s, c.claim, wop.FamilyPromptLibrary, promptlibrary.MethodGet, `{"promptId":"a@1"}`); err != nil {
			t.Fatalf("%s: get refused: %v", c.name, err)
		}
	}
	before := f.inv.count()
	for _, method := range []string{promptlibrary.MethodPublish, promptlibrary.MethodList, promptlibrary.MethodVersions,
		promptlibrary.MethodResolve, promptlibrary.MethodVerify, promptlibrary.MethodReindex} {
		for _, c := range callers {
			err := f.call(t, c.s, c.claim, wop.FamilyPromptLibrary, method, `{}`)
			capability := "host." + wop.FamilyPromptLibrary + "." + method
			if err == nil || err.Code != wop.CodeCapabilityNotDeclared || err.Capability != capability {
				t.Errorf("%s calling %s: %v, want capability_not_declared", c.name, method, err)
				continue
			}
			if !strings.Contains(err.Message, "only the operator") {
				t.Errorf("%s calling %s: message %q does not say why", c.name, method, err.Message)
			}
		}
	}
	if n := f.inv.count(); n != before {
		t.Errorf("the plugin was asked %d management calls, want none", n-before)
	}

	payload, _ := json.Marshal(promptlibrary.PublishRequest{Raw: []byte("---\nname: a\n---\nHi.\n")})
	if _, err := f.router.Call(context.Background(), dispatch.Caller{Name: dispatch.Operator}, wop.FamilyPromptLibrary,
		promptlibrary.MethodPublish, payload, f.run.CallContext(dispatch.Operator)); err != nil {
		t.Fatalf("the operator's publish refused: %v", err)
	}
	if n := f.inv.count(); n != before+1 {
		t.Errorf("the operator's publish reached the plugin %d times, want 1", n-before)
	}
}

// agentRuntime instances is the operator's alone: a pack, a plugin and an
// agent (through its runtime) that may all send messages are refused it
// with capability_not_declared, and the plugin is never asked. The
// operator's own call goes through, past the host's spawn policy.
func TestAgentInstancesIsOperatorOnly(t *testing.T) {
	f := newAgentFixture(t)
	reg := registry.New(registry.Implementation{Name: "wophost", Version: "test"})
	reg.Provide(registry.Family{Name: wop.FamilyAgents, Needs: []string{wop.FamilyAgentRuntime},
		Facets: map[string]json.RawMessage{agentruntime.FacetManifestRuntime: json.RawMessage(`{}`)}})
	reg.Declare("agents", "wophost-agentrt")
	reg.Ready("agents", []registry.Family{{Name: wop.FamilyAgentRuntime, Methods: []string{
		agentruntime.MethodSpawn, agentruntime.MethodDelegate, agentruntime.MethodConsensus,
		agentruntime.MethodMessageSend, agentruntime.MethodInstances,
	}}}, f.inv)
	f.router = dispatch.NewRouter(reg, 8, 1<<20)
	f.router.SetPolicy(wop.FamilyAgentRuntime, dispatch.NewAgentPolicy(agents.New(), nil))
	f.run.Pack = "demo.pack"
	f.run.Allowed = allowAll

	pack := ForPack(f.router, f.runs, hclog.NewNullLogger(), "demo.pack")
	plugin := ForPlugin(f.router, f.runs, hclog.NewNullLogger(), "other", allowAll)
	rt := ForPlugin(f.router, f.runs, hclog.NewNullLogger(), "agentrt", allowAll).ForAgents(f.lookup)
	callers := []struct {
		name, claim string
		s           *Server
	}{
		{"pack", "pack:demo.pack", pack},
		{"plugin", "plugin:other", plugin},
		{"agent", "agent:agt_1@" + f.digest, rt},
	}
	send := `{"fromAgentId":"agt_1","toAgentId":"agt_2","channel":"c","content":1,"idempotencyKey":"k"}`
	for _, c := range callers {
		if err := f.call(t, c.s, c.claim, wop.FamilyAgentRuntime, agentruntime.MethodMessageSend, send); err != nil {
			t.Fatalf("%s: messageSend refused: %v", c.name, err)
		}
	}
	before := f.inv.count()
	for _, c := range callers {
		for _, payload := range []string{`{}`, `{"limit":1}`} {
			err := f.call(t, c.s, c.claim, wop.FamilyAgentRuntime, agentruntime.MethodInstances, payload)
			if err == nil || err.Code != wop.CodeCapabilityNotDeclared || err.Capability != agentruntime.CapabilityInstances {
				t.Errorf("%s calling instances with %s: %v, want capability_not_declared", c.name, payload, err)
				continue
			}
			if !strings.Contains(err.Message, "only the operator") {
				t.Errorf("%s calling instances: message %q does not say why", c.name, err.Message)
			}
		}
	}
	if n := f.inv.count(); n != before {
		t.Errorf("the plugin was asked %d instances calls, want none", n-before)
	}

	if _, err := f.router.Call(context.Background(), dispatch.Caller{Name: dispatch.Operator}, wop.FamilyAgentRuntime,
		agentruntime.MethodInstances, []byte(`{"limit":10}`), f.run.CallContext(dispatch.Operator)); err != nil {
		t.Fatalf("the operator's instances refused: %v", err)
	}
	if n := f.inv.count(); n != before+1 {
		t.Errorf("the operator's instances reached the plugin %d times, want 1", n-before)
	}
}
