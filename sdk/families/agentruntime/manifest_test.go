package agentruntime

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

const validManifest = `{
  "id": "researcher",
  "name": "Researcher",
  "description": "Finds sources & returns a <cited> summary.",
  "model": "local-echo",
  "systemPromptRef": "team/researcher-system@4#sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
  "toolAllowlist": ["docs/search", "files/read_file"],
  "handoff": {"targets": ["writer"]},
  "limits": {"turns": 5, "toolCalls": 10, "delegationDepth": 2, "timeoutMs": 60000, "tokenBudget": 20000},
  "skills": [{"id": "literature-search", "description": "Search papers", "tags": ["search", "papers"]}]
}`

func TestParseManifestValid(t *testing.T) {
	m, err := ParseManifest([]byte(validManifest))
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "researcher" || m.Model != "local-echo" || len(m.ToolAllowlist) != 2 ||
		m.Handoff == nil || m.Handoff.Targets[0] != "writer" ||
		*m.Limits.Turns != 5 || *m.Limits.TokenBudget != 20000 || m.Skills[0].Tags[1] != "papers" {
		t.Fatalf("manifest = %+v", m)
	}
	if !m.Allows("docs", "search") || m.Allows("docs", "fetch") || m.Allows("doc", "s/search") {
		t.Error("Allows does not match the allowlist exactly")
	}
	if got := m.MCPServers(); strings.Join(got, ",") != "docs,files" {
		t.Errorf("MCPServers = %v", got)
	}
}

func TestParseManifestProblems(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(map[string]any)
		pointer string
		text    string
	}{
		{"missing id", func(d map[string]any) { delete(d, "id") }, "/id", "required"},
		{"bad id", func(d map[string]any) { d["id"] = "Research Er" }, "/id", "not an id"},
		{"id wrong type", func(d map[string]any) { d["id"] = 3 }, "/id", "expected a string"},
		{"missing description", func(d map[string]any) { d["description"] = "  " }, "/description", "required"},
		{"unknown field", func(d map[string]any) { d["tools"] = []any{} }, "/tools", "unknown field"},
		{"unpinned bare", func(d map[string]any) { d["systemPromptRef"] = "researcher-system" }, "/systemPromptRef", "not pinned"},
		{"unpinned label", func(d map[string]any) { d["systemPromptRef"] = "researcher-system@latest" }, "/systemPromptRef", "not pinned"},
		{"bad digest", func(d map[string]any) { d["systemPromptRef"] = "p@sha256:abc" }, "/systemPromptRef", "digest"},
		{"missing allowlist", func(d map[string]any) { delete(d, "toolAllowlist") }, "/toolAllowlist", "required"},
		{"allowlist no slash", func(d map[string]any) { d["toolAllowlist"] = []any{"docs/search", "search"} }, "/toolAllowlist/1", "serverId/toolName"},
		{"allowlist wildcard", func(d map[string]any) { d["toolAllowlist"] = []any{"docs/*"} }, "/toolAllowlist/0", "tool name"},
		{"allowlist dup", func(d map[string]any) { d["toolAllowlist"] = []any{"docs/search", "docs/search"} }, "/toolAllowlist/1", "repeats"},
		{"allowlist element type", func(d map[string]any) { d["toolAllowlist"] = []any{"docs/search", 7} }, "/toolAllowlist/1", "expected a string"},
		{"handoff self", func(d map[string]any) { d["handoff"] = map[string]any{"targets": []any{"researcher"}} }, "/handoff/targets/0", "itself"},
		{"handoff unknown", func(d map[string]any) { d["handoff"] = map[string]any{"to": "x"} }, "/handoff/to", "unknown field"},
		{"turns zero", func(d map[string]any) { d["limits"].(map[string]any)["turns"] = 0 }, "/limits/turns", "between 1"},
		{"turns fraction", func(d map[string]any) { d["limits"].(map[string]any)["turns"] = 1.5 }, "/limits/turns", "integer"},
		{"budget huge", func(d map[string]any) { d["limits"].(map[string]any)["tokenBudget"] = 1e12 }, "/limits/tokenBudget", "between"},
		{"limits unknown", func(d map[string]any) { d["limits"].(map[string]any)["maxTurns"] = 3 }, "/limits/maxTurns", "unknown field"},
		{"skill tag empty", func(d map[string]any) {
			d["skills"] = []any{map[string]any{"id": "s", "tags": []any{""}}}
		}, "/skills/0/tags/0", "required"},
		{"skill not object", func(d map[string]any) { d["skills"] = []any{"search"} }, "/skills/0", "expected an object"},
		{"control char", func(d map[string]any) { d["name"] = "a\x00b" }, "/name", "control character"},
		{"pointer escaping", func(d map[string]any) { d["a/b~c"] = 1 }, "/a~1b~0c", "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d map[string]any
			if err := json.Unmarshal([]byte(validManifest), &d); err != nil {
				t.Fatal(err)
			}
			tt.edit(d)
			b, _ := json.Marshal(d)
			_, err := ParseManifest(b)
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("error = %v, want *ManifestError", err)
			}
			for _, p := range me.Problems {
				if p.Pointer == tt.pointer && strings.Contains(p.Message, tt.text) {
					return
				}
			}
			t.Errorf("problems %v do not include %s containing %q", err, tt.pointer, tt.text)
		})
	}
}

func TestParseManifestReportsEveryProblem(t *testing.T) {
	_, err := ParseManifest([]byte(`{"id":"", "name":"", "description":"d", "systemPromptRef":"p", "toolAllowlist":["x"]}`))
	var me *ManifestError
	if !errors.As(err, &me) {
		t.Fatalf("error = %v", err)
	}
	got := map[string]bool{}
	for _, p := range me.Problems {
		got[p.Pointer] = true
	}
	for _, want := range []string{"/id", "/name", "/systemPromptRef", "/toolAllowlist/0"} {
		if !got[want] {
			t.Errorf("no problem reported at %s: %v", want, err)
		}
	}
}

func TestNullOptionalFields(t *testing.T) {
	m, err := ParseManifest([]byte(`{"id":"a","name":"A","description":"d","systemPromptRef":"p@1","toolAllowlist":[],
		"model":null,"handoff":null,"skills":null,"limits":{"turns":null,"toolCalls":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := m.Canonical()
	if want := `{"description":"d","id":"a","limits":{"toolCalls":2},"name":"A","systemPromptRef":"p@1","toolAllowlist":[]}`; string(c) != want {
		t.Errorf("canonical = %s, want %s", c, want)
	}
	if _, err := ParseManifest([]byte(`{"id":null,"name":"A","description":"d","systemPromptRef":"p@1","toolAllowlist":[]}`)); err == nil {
		t.Error("a null id was accepted")
	}
}

func TestParseManifestNotJSON(t *testing.T) {
	for _, in := range []string{``, `{`, `[]`, `{} {}`, `null`, strings.Repeat(" ", MaxManifestBytes+1)} {
		if _, err := ParseManifest([]byte(in)); err == nil {
			t.Errorf("ParseManifest(%.20q) succeeded", in)
		}
	}
}

func TestCanonicalAndDigest(t *testing.T) {
	a, err := ParseManifest([]byte(validManifest))
	if err != nil {
		t.Fatal(err)
	}
	// The same manifest with keys reordered and whitespace changed.
	var d map[string]any
	_ = json.Unmarshal([]byte(validManifest), &d)
	reordered, _ := json.MarshalIndent(d, "", "\t")
	b, err := ParseManifest(reordered)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := a.Canonical()
	cb, _ := b.Canonical()
	if string(ca) != string(cb) {
		t.Fatalf("canonical forms differ:\n%s\n%s", ca, cb)
	}
	want := `{"description":"Finds sources & returns a <cited> summary.","handoff":{"targets":["writer"]},"id":"researcher",` +
		`"limits":{"delegationDepth":2,"timeoutMs":60000,"tokenBudget":20000,"toolCalls":10,"turns":5},"model":"local-echo",` +
		`"name":"Researcher","skills":[{"description":"Search papers","id":"literature-search","tags":["search","papers"]}],` +
		`"systemPromptRef":"team/researcher-system@4#sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",` +
		`"toolAllowlist":["docs/search","files/read_file"]}`
	if string(ca) != want {
		t.Errorf("canonical\n got %s\nwant %s", ca, want)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db || !strings.HasPrefix(da, "sha256:") || len(da) != len("sha256:")+64 {
		t.Errorf("digests %s %s", da, db)
	}
	// The canonical form parses back to the same digest.
	c, err := ParseManifest(ca)
	if err != nil {
		t.Fatal(err)
	}
	if dc, _ := c.Digest(); dc != da {
		t.Errorf("digest after round trip %s, want %s", dc, da)
	}
	// Any change of content changes the digest.
	b.Description += "."
	if db2, _ := b.Digest(); db2 == da {
		t.Error("digest did not change with the description")
	}
	// An empty allowlist is written, not dropped.
	m := &Manifest{ID: "a", Name: "A", Description: "d", SystemPromptRef: "p@1"}
	cm, _ := m.Canonical()
	if !strings.Contains(string(cm), `"toolAllowlist":[]`) {
		t.Errorf("canonical without allowlist: %s", cm)
	}
}

func TestParsePromptPin(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	good := map[string]PromptPin{
		"p@1":                          {Name: "p", Version: "1"},
		"team/p@1.2.0":                 {Name: "team/p", Version: "1.2.0"},
		"p@sha256:" + hex:              {Name: "p", Digest: "sha256:" + hex},
		"p@3#sha256:" + hex:            {Name: "p", Version: "3", Digest: "sha256:" + hex},
		"a.b-c_d@2026.11.29+build.1-x": {Name: "a.b-c_d", Version: "2026.11.29+build.1-x"},
	}
	for in, want := range good {
		got, err := ParsePromptPin(in)
		if err != nil || got != want {
			t.Errorf("ParsePromptPin(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if got.String() != in {
			t.Errorf("String() = %q, want %q", got.String(), in)
		}
	}
	for _, in := range []string{"p", "p@", "p@latest", "p@prod", "@1", "p@#sha256:" + hex, "p@1#" + hex, "p@sha256:" + strings.ToUpper(hex), "p q@1"} {
		if _, err := ParsePromptPin(in); err == nil {
			t.Errorf("ParsePromptPin(%q) succeeded", in)
		}
	}
	for _, in := range []string{"p@latest", "p", "p@"} {
		if _, err := ParsePromptPin(in); !errors.Is(err, ErrUnpinned) {
			t.Errorf("ParsePromptPin(%q) error %v does not wrap ErrUnpinned", in, err)
		}
	}
}

// TestPromptPinGrammarIsTheHosts checks that an agent manifest's
// systemPromptRef accepts exactly the references the host resolves: the
// references below once passed the agent runtime's own looser grammar and
// were refused by the host's.
func TestPromptPinGrammarIsTheHosts(t *testing.T) {
	hex := strings.Repeat("0f", 32)
	for _, ref := range []string{
		"x@v1", "Team/X@1", "x@1.0#", "x@1.0", "team/x@2#sha256:" + hex, "x@sha256:" + hex,
		"x@01", "x@1.", "x/../y@1", "x@1#sha256:" + hex[:10], "x@1.0.0-rc.1+b",
	} {
		_, agentErr := ParsePromptPin(ref)
		_, hostErr := promptlibrary.ParsePin(ref)
		if (agentErr == nil) != (hostErr == nil) {
			t.Errorf("%q: agent manifest says %v, host says %v", ref, agentErr, hostErr)
		}
		m, err := ParseManifest([]byte(validManifest))
		if err != nil {
			t.Fatal(err)
		}
		m.SystemPromptRef = ref
		err = m.Validate()
		if (err == nil) != (hostErr == nil) {
			t.Errorf("%q: Validate says %v, host says %v", ref, err, hostErr)
		}
	}
}

func TestParseToolRef(t *testing.T) {
	r, err := ParseToolRef("files/read.file-v2")
	if err != nil || r != (ToolRef{"files", "read.file-v2"}) || r.String() != "files/read.file-v2" {
		t.Errorf("ParseToolRef = %+v, %v", r, err)
	}
	for _, in := range []string{"", "/x", "x/", "a/b/c", "a b/x", "x/" + strings.Repeat("t", 129)} {
		if _, err := ParseToolRef(in); err == nil {
			t.Errorf("ParseToolRef(%q) succeeded", in)
		}
	}
}

func TestValidateNil(t *testing.T) {
	var m *Manifest
	if err := m.Validate(); err == nil {
		t.Error("nil manifest validated")
	}
}

func TestLimitsValidate(t *testing.T) {
	bad := -1
	if err := (&Limits{ToolCalls: &bad}).Validate(); err == nil || !strings.Contains(err.Error(), "/toolCalls") {
		t.Errorf("Validate = %v", err)
	}
	var l *Limits
	if err := l.Validate(); err != nil {
		t.Errorf("nil limits: %v", err)
	}
}
