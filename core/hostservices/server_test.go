package hostservices

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/hostwire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// recorder serves a family and records the calls that reach it, and the
// deadline of each.
type recorder struct {
	mu        sync.Mutex
	calls     []string
	deadlines []time.Time
}

func (r *recorder) Invoke(_ context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, family+"."+method+" "+string(payload))
	r.deadlines = append(r.deadlines, call.Deadline)
	return []byte(`{}`), nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// lastDeadline is the deadline of the last call that reached the plugin.
func (r *recorder) lastDeadline() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deadlines[len(r.deadlines)-1]
}

// agentFixture is a router over mcp (with the client facet) and
// aiEnvelope, a run in flight, and a manifest an agent runs.
type agentFixture struct {
	router   *dispatch.Router
	runs     *dispatch.Runs
	run      *dispatch.Run
	inv      *recorder
	manifest *agentruntime.Manifest
	digest   string
}

func newAgentFixture(t *testing.T) *agentFixture {
	t.Helper()
	reg := registry.New(registry.Implementation{Name: "wophost", Version: "test"})
	f := &agentFixture{inv: &recorder{}, runs: dispatch.NewRuns()}
	reg.Declare("mcp", "mcp")
	reg.Ready("mcp", []registry.Family{
		{Name: wop.FamilyMCP, Methods: []string{"callTool", "listTools"}, Facets: map[string]json.RawMessage{"client": json.RawMessage(`true`)}, Details: json.RawMessage(`{"servers":["tools","other"]}`)},
		{Name: wop.FamilyAIEnvelope, Methods: []string{"generate"}},
	}, f.inv)
	f.router = dispatch.NewRouter(reg, 8, 1<<20)
	f.router.SetPolicy(wop.FamilyMCP, dispatch.MCPPolicy{})
	f.run = &dispatch.Run{ID: "run_1", NodeID: "node_1", TypeID: "operator.call", Token: dispatch.NewRunToken()}
	t.Cleanup(f.runs.Add(f.run))
	m, err := agentruntime.ParseManifest([]byte(`{"id":"math","name":"Math","description":"adds",` +
		`"systemPromptRef":"t/math@1","toolAllowlist":["tools/add"]}`))
	if err != nil {
		t.Fatal(err)
	}
	f.manifest = m
	if f.digest, err = m.Digest(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *agentFixture) lookup(digest string) (*agentruntime.Manifest, bool) {
	if digest == f.digest {
		return f.manifest, true
	}
	return nil, false
}

func (f *agentFixture) call(t *testing.T, s *Server, caller, family, method, payload string) *wop.Error {
	t.Helper()
	cc := f.run.CallContext(caller)
	_, err := s.Call(context.Background(), &wophostv1.CallRequest{
		Family: family, Method: method, Payload: []byte(payload), Call: hostwire.CallContextToProto(cc),
	})
	if err == nil {
		return nil
	}
	return hostwire.FromStatus(err)
}

func allowAll(string, string) bool { return true }

// The host holds an agent's calls to its manifest's toolAllowlist, and
// lets no other plugin call as an agent.
func TestAgentCallerAllowlist(t *testing.T) {
	f := newAgentFixture(t)
	rt := ForPlugin(f.router, f.runs, hclog.NewNullLogger(), "agentrt", allowAll).ForAgents(f.lookup)
	agent := "agent:agt_1@" + f.digest

	if err := f.call(t, rt, agent, "mcp", "callTool", `{"serverId":"tools","name":"add","arguments":{"a":1}}`); err != nil {
		t.Fatalf("allowed tool refused: %v", err)
	}
	if err := f.call(t, rt, agent, "mcp", "listTools", `{"serverId":"tools"}`); err != nil {
		t.Fatalf("listTools on an allowed server refused: %v", err)
	}
	if err := f.call(t, rt, agent, "aiEnvelope", "generate", `{}`); err != nil {
		t.Fatalf("generate refused: %v", err)
	}
	before := f.inv.count()
	for _, tc := range []struct{ name, caller, method, payload string }{
		{"tool not listed", agent, "callTool", `{"serverId":"tools","name":"fail"}`},
		{"same tool, other server", agent, "callTool", `{"serverId":"other","name":"add"}`},
		{"server not named", agent, "listTools", `{"serverId":"other"}`},
		{"unknown digest", "agent:agt_1@sha256:" + "00000000000000000000000000000000000000000000000000000000000000ff", "callTool", `{"serverId":"tools","name":"add"}`},
		{"malformed claim", "agent:agt_1", "callTool", `{"serverId":"tools","name":"add"}`},
		{"runtime without a claim", "plugin:agentrt", "callTool", `{"serverId":"tools","name":"add"}`},
	} {
		err := f.call(t, rt, tc.caller, "mcp", tc.method, tc.payload)
		if err == nil || err.Code != wop.CodeCapabilityNotDeclared || err.Capability != "host.mcp."+tc.method {
			t.Errorf("%s: %+v, want capability_not_declared for host.mcp.%s", tc.name, err, tc.method)
		}
	}
	if n := f.inv.count(); n != before {
		t.Errorf("%d refused calls reached the plugin", n-before)
	}

	// A plugin that does not run agents cannot claim to be one, even for
	// a call the manifest would allow.
	other := ForPlugin(f.router, f.runs, hclog.NewNullLogger(), "mcp-sampler", allowAll)
	if err := f.call(t, other, agent, "mcp", "callTool", `{"serverId":"tools","name":"add"}`); err == nil || err.Code != wop.CodeCapabilityNotDeclared {
		t.Errorf("spoofed agent caller: %+v, want capability_not_declared", err)
	}
	// Its own calls are not affected.
	if err := f.call(t, other, "plugin:mcp-sampler", "mcp", "callTool", `{"serverId":"other","name":"anything"}`); err != nil {
		t.Errorf("plugin call refused: %v", err)
	}
}
