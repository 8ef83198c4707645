package dispatch

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wophost/wophost/core/agents"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/wop"
)

const testPin = "t/a@1#sha256:0000000000000000000000000000000000000000000000000000000000000001"

func testChecker() *agents.Checker {
	return &agents.Checker{
		ResolvePrompt: func(_ context.Context, ref string) (agents.ResolvedPrompt, error) {
			if ref != testPin {
				return agents.ResolvedPrompt{}, wop.Errorf("prompt_not_found", "no %s", ref)
			}
			return agents.ResolvedPrompt{Ref: ref, Name: "t/a", Version: "1"}, nil
		},
		MCPServers: func() ([]string, bool) { return []string{"tools"}, true },
	}
}

func testManifest(id string) json.RawMessage {
	return json.RawMessage(`{"id":"` + id + `","name":"N","description":"D","systemPromptRef":"` + testPin + `","toolAllowlist":["tools/add"]}`)
}

// fakeRuntime answers spawn as the plugin does, with the digest of the
// manifest it was sent, and records what it was sent.
type fakeRuntime struct {
	sent   map[string]json.RawMessage
	digest string // when set, answered instead of the true digest
}

func (f *fakeRuntime) next(payload []byte) ([]byte, error) {
	f.sent = nil
	if err := json.Unmarshal(payload, &f.sent); err != nil {
		return nil, err
	}
	m, err := agentruntime.ParseManifest(f.sent["manifest"])
	if err != nil {
		return nil, wop.Errorf(agentruntime.CodeAgentNotFound, "no manifest")
	}
	d, _ := m.Digest()
	if f.digest != "" {
		d = f.digest
	}
	return json.Marshal(agentruntime.SpawnResult{AgentInstanceID: "agt_1", ManifestDigest: d})
}

func TestAgentPolicySpawn(t *testing.T) {
	reg := agents.New()
	entries, err := testChecker().CheckPack(context.Background(), "p", []json.RawMessage{testManifest("a")})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Install(entries); err != nil {
		t.Fatal(err)
	}
	p := NewAgentPolicy(reg, testChecker())
	rt := &fakeRuntime{}
	call := func(payload string) ([]byte, error) {
		return p.Call(context.Background(), Caller{}, wop.CallContext{}, agentruntime.MethodSpawn, []byte(payload), rt.next)
	}

	// By id: the canonical manifest travels beside it, and other fields
	// are kept.
	if _, err := call(`{"manifestId":"a","idempotencyKey":"k","config":{"limits":{"turns":1}}}`); err != nil {
		t.Fatal(err)
	}
	if string(rt.sent["manifest"]) != string(entries[0].Canonical) || string(rt.sent["idempotencyKey"]) != `"k"` || rt.sent["config"] == nil {
		t.Errorf("sent %v", rt.sent)
	}
	rt.sent = nil
	_, err = call(`{"manifestId":"ghost","idempotencyKey":"k"}`)
	if we := wop.AsError(err); we.Code != agentruntime.CodeAgentNotFound || we.Capability != agentruntime.CapabilitySpawn || rt.sent != nil {
		t.Errorf("unknown id: %+v, plugin sent %v", we, rt.sent)
	}
	for _, bad := range []string{`{"idempotencyKey":"k"}`, `{"manifestId":"a","manifest":{},"idempotencyKey":"k"}`, `[1]`, `{"manifestId":7}`} {
		if _, err := call(bad); wop.CodeOf(err) != wop.CodeValidation {
			t.Errorf("%s: %v, want validation_error", bad, err)
		}
	}

	// Inline: the install checks, then the manifest is known by digest.
	_, err = call(`{"manifest":{"id":"b","name":"N","description":"D","systemPromptRef":"t/b@1","toolAllowlist":["web/get"]},"idempotencyKey":"k"}`)
	if we := wop.AsError(err); we.Code != wop.CodeValidation || !strings.Contains(we.Message, "/manifest/systemPromptRef") || !strings.Contains(we.Message, "/manifest/toolAllowlist/0") {
		t.Errorf("inline checks: %+v", we)
	}
	out, err := call(`{"manifest":` + string(testManifest("b")) + `,"idempotencyKey":"k"}`)
	if err != nil {
		t.Fatal(err)
	}
	var res agentruntime.SpawnResult
	_ = json.Unmarshal(out, &res)
	if m, ok := reg.ByDigest(res.ManifestDigest); !ok || m.ID != "b" || reg.Has("b") {
		t.Errorf("inline manifest not remembered by digest only: %v %v", m, ok)
	}

	// A runtime that reports another digest is not believed.
	rt.digest = "sha256:ff"
	if _, err := call(`{"manifestId":"a","idempotencyKey":"k"}`); wop.CodeOf(err) != wop.CodeUpstreamUnavailable {
		t.Errorf("wrong digest: %v", err)
	}
	// Other methods pass through untouched.
	got, err := p.Call(context.Background(), Caller{}, wop.CallContext{}, agentruntime.MethodDelegate, []byte(`{"x":1}`), func(b []byte) ([]byte, error) { return b, nil })
	if err != nil || string(got) != `{"x":1}` {
		t.Errorf("delegate: %s %v", got, err)
	}
}

func TestParseAgentCaller(t *testing.T) {
	for _, tc := range []struct {
		in       string
		agent    bool
		ok       bool
		instance string
	}{
		{"plugin:agentrt", false, true, ""},
		{"agent:agt_1@sha256:ab", true, true, "agt_1"},
		{"agent:agt_1", true, false, ""},
		{"agent:@sha256:ab", true, false, ""},
		{"agent:agt_1@", true, false, ""},
	} {
		c, isAgent, err := ParseAgentCaller(tc.in)
		if isAgent != tc.agent || (err == nil) != tc.ok || c.InstanceID != tc.instance {
			t.Errorf("%q: %+v %v %v", tc.in, c, isAgent, err)
		}
	}
}
