package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/sdk/wop"
)

// A pack that declares aiEnvelope but not its await facet cannot start
// an asynchronous generate however it spells the member: on the direct
// channel and on the routed path alike, each spelling gets the same
// refusal, never pending.
func TestAsyncSpellingsAreRefusedOnEveryPath(t *testing.T) {
	spellings := []string{
		`"async":true`, `"Async":true`, `"ASYNC":true`, `"\u0061sync":true`, `"async":false,"async":true`,
	}
	answers := map[bool][]string{}
	for _, directCalls := range []bool{true, false} {
		cfg := writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "ai" {
  plugin       = %q
  direct_calls = %t
  config {
%s
    async {
      enabled = true
    }
  }
}
pack "private.wophost.probe" { path = %q }
`, binary(t, "./plugins/aienvelope"), directCalls, localAI, probePack(t)))
		if err := os.WriteFile(filepath.Join(filepath.Dir(cfg), "rules.json"), []byte(aiRules), 0o644); err != nil {
			t.Fatal(err)
		}
		h := startHost(t, cfg)
		for i, s := range spellings {
			payload := fmt.Sprintf(`{"envelopeType":"x","userMessage":"hi","idempotencyKey":"s-%d",%s}`, i, s)
			in, _ := json.Marshal(map[string]string{"family": "aiEnvelope", "method": "generate", "payloadText": payload})
			res, err := h.Run(context.Background(), "probe.call", in, host.RunOptions{Timeout: time.Minute})
			var out json.RawMessage
			if res != nil {
				out = res.Output
			}
			code := wop.CodeOf(err)
			if err == nil || (code != wop.CodeCapabilityNotDeclared && code != wop.CodeValidation) {
				t.Fatalf("direct_calls = %t, {%s}: %s, %v; want capability_not_declared or validation_error", directCalls, s, out, err)
			}
			answers[directCalls] = append(answers[directCalls], code+": "+wop.AsError(err).Message)
		}
	}
	for i, s := range spellings {
		if answers[true][i] != answers[false][i] {
			t.Errorf("{%s}: on the channel %q, routed %q", s, answers[true][i], answers[false][i])
		}
	}
	t.Logf("answers: %q", answers[true])
}
