package packmanifest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

func TestPromptsLockMap(t *testing.T) {
	doc := func(prompts map[string]any) []byte {
		b, _ := json.Marshal(map[string]any{
			"name": "community.acme.demo", "version": "1.0.0", "kind": "node",
			"engines":  map[string]string{"openwop": ">=2.0 <3.0.0"},
			"runtime":  map[string]string{"language": "go", "entry": "bin/demo"},
			"nodes":    []any{map[string]string{"typeId": "demo.echo", "version": "1.0.0", "category": "data", "role": "pure"}},
			PromptsKey: prompts,
		})
		return b
	}
	digest := "sha256:" + strings.Repeat("ab", 32)
	m, err := Parse(doc(map[string]any{"summary": "demo/summary@1.0.0", "sys": "sys@3#" + digest, "tone": "tone@" + digest}))
	if err != nil {
		t.Fatalf("valid lock map refused: %v", err)
	}
	if m.Prompts["sys"] != "sys@3#"+digest {
		t.Errorf("prompts = %v", m.Prompts)
	}
	for key, value := range map[string]string{
		"sys":     "sys",
		"latest":  "sys@latest",
		"label":   "sys@production",
		"Bad":     "sys@1",
		"../x":    "sys@1",
		"badhash": "sys@1#sha256:00",
	} {
		_, err := Parse(doc(map[string]any{key: value}))
		we := wop.AsError(err)
		if we.Code != wop.CodePackValidationFailed || !strings.Contains(we.Message, "/x-wophost-prompts/") {
			t.Errorf("prompts[%q] = %q: %v, want pack_validation_failed at /x-wophost-prompts/...", key, value, err)
		}
	}
}
