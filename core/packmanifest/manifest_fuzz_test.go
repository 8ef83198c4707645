package packmanifest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

// FuzzParse feeds arbitrary bytes to Parse, the pack.json boundary. It
// checks that nothing panics, that every refusal is a *wop.Error with a
// manifest refusal's code whose problems each name a JSON pointer, that nothing over MaxSize is accepted, that an accepted entry
// stays inside the pack directory, and that an accepted manifest survives
// a JSON round trip unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte(validPack))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	const head = `{"name":"community.a.b","version":"1.0.0","kind":"node","engines":{"openwop":">=2.0 <3.0.0"},`
	f.Add([]byte(head + `"runtime":{"language":"go","entry":"../x"},"nodes":[{"typeId":"a.x","version":"1.0.0","category":"data","role":"pure"}]}`))
	f.Add([]byte(head + `"runtime":{"language":"go","entry":"bin/x"},"peerDependencies":{"host.aiEnvelope.await":"supported"},"nodes":[{"typeId":"a.x","version":"1.0.0","category":"data","role":"pure","x-wophost-requires":["host.aiEnvelope"],"inputSchemaRef":"s/in.json"}]}`))
	f.Add([]byte(head + `"runtime":{"language":"go","entry":"x"},"nodes":[{"typeId":"a.x","version":"1.0.0","category":"data","role":"pure","inputSchema":{},"requires":[]}],"prompts":{}}`))
	f.Add([]byte(head + `"runtime":{"language":"go","entry":"x","requires":["clock"]},"x-foo":1,"vendor.acme.thing":{},"signing":{"keyId":"k","scheme":"ed25519-canonical-json"},` +
		`"nodes":[{"typeId":"a.x","version":"1.0.0","category":"data","role":"pure","x-foo":[],"outputs":{"o":{"sensitive":true}},"requiresSecrets":[{"id":"k","kind":"api-key"}],"auth":{"type":"oauth2","provider":"p"}}]}`))
	f.Add([]byte(`{"name":"community.a.b","version":"1.0.0","kind":"agent","engines":{"openwop":">=3 <4.0.0"},"runtime":{"language":"remote","entry":"https://x"},"agents":[{}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			if m != nil {
				t.Fatalf("Parse returned a manifest and an error: %v", err)
			}
			var we *wop.Error
			if !errors.As(err, &we) {
				t.Fatalf("refusal %v (%T) is not a *wop.Error", err, err)
			}
			switch we.Code {
			case wop.CodePackValidationFailed, CodePackKindInvalid, CodePackEngineUnsupported, CodePackPeerDependencyUndefined, CodeOAuthProviderUnsupported:
			default:
				t.Fatalf("refusal %v has code %q, not a manifest refusal", err, we.Code)
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
