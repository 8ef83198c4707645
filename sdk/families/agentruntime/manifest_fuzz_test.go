package agentruntime

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzParseManifest feeds arbitrary bytes to ParseManifest. Nothing may
// panic; a refusal is a *ManifestError with at least one problem, each a
// JSON pointer (or the root) and a message; nothing over MaxManifestBytes
// is accepted; an accepted manifest validates, and its canonical form
// parses back to the same canonical form and digest.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(validManifest))
	f.Add([]byte(`{"id":"a","name":"A","description":"d","systemPromptRef":"p@1","toolAllowlist":[]}`))
	f.Add([]byte(`{"id":"a","limits":{"turns":1e400}}`))
	f.Add([]byte(`{"id":"A/../b","handoff":{"targets":[null]},"skills":[{"id":""}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{} {}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			checkManifestError(t, err)
			return
		}
		if len(data) > MaxManifestBytes {
			t.Fatalf("accepted a %d-byte manifest, over MaxManifestBytes", len(data))
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted manifest does not validate: %v", err)
		}
		canon, err := m.Canonical()
		if err != nil {
			t.Fatalf("canonical form of an accepted manifest: %v", err)
		}
		m2, err := ParseManifest(canon)
		if err != nil {
			t.Fatalf("canonical form does not parse: %v\n%s", err, canon)
		}
		canon2, err := m2.Canonical()
		if err != nil || string(canon2) != string(canon) {
			t.Fatalf("canonical round trip changed the manifest:\n%s\n%s (%v)", canon, canon2, err)
		}
		d1, err1 := m.Digest()
		d2, err2 := m2.Digest()
		if err1 != nil || err2 != nil || d1 != d2 {
			t.Fatalf("digest not stable: %s %v / %s %v", d1, err1, d2, err2)
		}
	})
}

// FuzzParsePackAgents checks the list form: problems carry pointers that
// start at /agents/<i>, and every accepted id is unique.
func FuzzParsePackAgents(f *testing.F) {
	f.Add([]byte(`[` + validManifest + `]`))
	f.Add([]byte(`[{"id":"a","name":"A","description":"d","systemPromptRef":"p@1","handoff":{"targets":["b"]}},{"id":"a"}]`))
	f.Add([]byte(`[1, "x", null, {}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var list []json.RawMessage
		if json.Unmarshal(data, &list) != nil {
			return
		}
		ms, err := ParsePackAgents(list, func(id string) bool { return id == "known" })
		if err != nil {
			var me *ManifestError
			if !errors.As(err, &me) || len(me.Problems) == 0 {
				t.Fatalf("refusal %v (%T) is not a *ManifestError with problems", err, err)
			}
			for _, p := range me.Problems {
				if !strings.HasPrefix(p.Pointer, "/agents/") || p.Message == "" {
					t.Fatalf("problem %q: %q does not name its agent", p.Pointer, p.Message)
				}
			}
			return
		}
		seen := map[string]bool{}
		for _, m := range ms {
			if m == nil {
				t.Fatal("accepted list holds a nil manifest")
			}
			if seen[m.ID] {
				t.Fatalf("id %q accepted twice", m.ID)
			}
			seen[m.ID] = true
		}
	})
}

func checkManifestError(t *testing.T, err error) {
	t.Helper()
	var me *ManifestError
	if !errors.As(err, &me) || len(me.Problems) == 0 {
		t.Fatalf("refusal %v (%T) is not a *ManifestError with problems", err, err)
	}
	for _, p := range me.Problems {
		if p.Pointer != "" && !strings.HasPrefix(p.Pointer, "/") {
			t.Fatalf("problem pointer %q is not a JSON pointer", p.Pointer)
		}
		if p.Message == "" {
			t.Fatalf("problem at %q has no message", p.Pointer)
		}
	}
}
