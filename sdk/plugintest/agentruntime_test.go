package plugintest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

// The scripted host of the agentRuntime checks answers like the real
// families would: a prompt whose digest matches its raw bytes, and
// completed envelopes whose payload is parsed JSON when the text is JSON.
func TestAgentHost(t *testing.T) {
	h := &agentHost{}
	ctx := context.Background()
	out, err := h.serve(ctx, "promptLibrary", "get", []byte(`{"promptId":"p@1"}`), wop.CallContext{})
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ PromptID, Digest, Raw, SystemPrompt string }
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(p.Raw))
	if p.PromptID != "p@1" || p.Digest != "sha256:"+hex.EncodeToString(sum[:]) || p.SystemPrompt != p.Raw {
		t.Errorf("prompt = %+v", p)
	}

	h.script(func(caller string) string {
		if caller == "agent:a" {
			return `{"vote":"yes"}`
		}
		return "plain"
	})
	for caller, want := range map[string]string{"agent:a": `{"vote":"yes"}`, "agent:b": `"plain"`} {
		out, err := h.serve(ctx, "aiEnvelope", "generate", []byte(`{"envelopeType":"t"}`), wop.CallContext{Caller: caller})
		if err != nil {
			t.Fatal(err)
		}
		var g struct {
			EnvelopeType, Status string
			Payload              json.RawMessage
		}
		if err := json.Unmarshal(out, &g); err != nil || g.EnvelopeType != "t" || g.Status != "completed" || string(g.Payload) != want {
			t.Errorf("generate for %s = %s, %v", caller, out, err)
		}
	}
	if h.generated() != 2 {
		t.Errorf("generated = %d", h.generated())
	}
	if _, err := h.serve(ctx, "mcp", "callTool", nil, wop.CallContext{}); wop.CodeOf(err) != wop.CodeCapabilityNotProvided {
		t.Errorf("mcp.callTool = %v, want capability_not_provided", err)
	}
}

func TestAgentJSONSame(t *testing.T) {
	if !agentJSONSame(json.RawMessage(`{"a":1,"b":[2]}`), json.RawMessage(`{ "b":[2], "a":1 }`)) || agentJSONSame(json.RawMessage(`1`), json.RawMessage(`2`)) || agentJSONSame(json.RawMessage(`{`), json.RawMessage(`{`)) {
		t.Error("agentJSONSame compares wrongly")
	}
}
