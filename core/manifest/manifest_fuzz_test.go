package manifest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

// FuzzParse feeds arbitrary bytes to Parse, the pack.json boundary. It
// checks that nothing panics, that every refusal is a
// pack_validation_failed *wop.Error whose problems each name a JSON
// pointer, that nothing over MaxSize is accepted, that an accepted entry
// stays inside the pack directory, and that an accepted manifest survives
// a JSON round trip unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte(validPack))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"name":"a.b","version":"1.0.0","kind":"node","runtime":{"language":"go","entry":"../x"},"nodes":[{"typeId":"a.x","version":"1.0.0","category":"data","role":"pure"}]}`))
	f.Add([]byte(`{"name":"a.b","version":"1.0.0","kind":"node","runtime":{"language":"go","entry":"bin/x"},"peerDependencies":{"host.aiEnvelope.await":"supported"},"nodes":[{"typeId":"a.x","version":"1.0.0","category":"data","role":"pure","requires":["host.aiEnvelope"],"inputSchema":{"$ref":"http://example.com/s"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			if m != nil {
				t.Fatalf("Parse returned a manifest and an error: %v", err)
			}
			var we *wop.Error
			if !errors.As(err, &we) || we.Code != wop.CodePackValidationFailed {
				t.Fatalf("refusal %v (%T) is not pack_validation_failed", err, err)
			}
			raw, _ := json.Marshal(we.Details)
			var details struct {
				Problems []Problem `json:"problems"`
			}
			if json.Unmarshal(raw, &details) != nil || len(details.Problems) == 0 {
				t.Fatalf("refusal without problems: %v", err)
			}
			for _, p := range details.Problems {
				if p.Field != "" && !strings.HasPrefix(p.Field, "/") {
					t.Fatalf("problem field %q is not a JSON pointer", p.Field)
				}
				if p.Message == "" {
					t.Fatalf("problem at %q has no message", p.Field)
				}
			}
			return
		}
		if len(data) > MaxSize {
			t.Fatalf("accepted a %d-byte manifest, over MaxSize", len(data))
		}
		if msg := checkEntry(m.Runtime.Entry); msg != "" {
			t.Fatalf("accepted runtime.entry %q: %s", m.Runtime.Entry, msg)
		}
		// Parse normalises legacy keys, so the round trip starts from its
		// output: what it accepted and wrote back must parse to the same.
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("marshal accepted manifest: %v", err)
		}
		m2, err := Parse(again)
		if err != nil {
			t.Fatalf("re-parsing an accepted manifest failed: %v\n%s", err, again)
		}
		third, _ := json.Marshal(m2)
		if string(third) != string(again) {
			t.Fatalf("round trip changed the manifest:\n%s\n%s", again, third)
		}
	})
}
