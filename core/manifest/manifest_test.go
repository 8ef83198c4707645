package manifest

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

const validPack = `{
  "name": "community.demo",
  "version": "1.2.0",
  "kind": "node",
  "description": "A demo pack",
  "runtime": {"language": "go", "entry": "bin/demo"},
  "peerDependencies": {"aiEnvelope": "required", "mcp": "optional", "acme.kv": "required"},
  "peerDependenciesMeta": {"aiEnvelope": {"facets": ["await"]}, "mcp": {"facets": ["client"]}},
  "nodes": [
    {
      "typeId": "demo.summarize", "version": "1.0.0", "category": "chat", "role": "pure",
      "requires": ["promptLibrary", "acme.kv.watch", "other.store.watch"],
      "inputSchema": {
        "type": "object",
        "required": ["name", "age"],
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "additionalProperties": false
      },
      "outputSchema": {"type": "object"}
    },
    {"typeId": "demo.echo", "version": "0.1.0-beta.1+build.5", "category": "data", "role": "pure"}
  ],
  "agents": [{"id": "helper"}],
  "prompts": {"summary": "demo/summary@1.0.0"},
  "engines": {"openwop": ">=2.0 <3.0.0"}
}`

// variant returns validPack with edit applied to its decoded form.
func variant(t *testing.T, edit func(doc map[string]any)) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(validPack), &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func node(doc map[string]any, i int) map[string]any {
	return doc["nodes"].([]any)[i].(map[string]any)
}

func obj(doc map[string]any, key string) map[string]any {
	return doc[key].(map[string]any)
}

// problemsOf checks that err is pack_validation_failed and returns its
// problems.
func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	var we *wop.Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T) is not a *wop.Error", err, err)
	}
	if we.Code != wop.CodePackValidationFailed {
		t.Fatalf("code = %q, want %q", we.Code, wop.CodePackValidationFailed)
	}
	var d struct{ Problems []Problem }
	if err := json.Unmarshal(we.Details, &d); err != nil {
		t.Fatalf("details %s: %v", we.Details, err)
	}
	// Each problem has a line of the message to itself.
	lines := strings.Split(we.Message, "\n")
	for _, p := range d.Problems {
		n := 0
		for _, l := range lines {
			if strings.HasSuffix(l, label(p.Field)+": "+p.Message) || p.Line > 0 && strings.HasSuffix(l, ": "+p.Message) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("message %q does not list %s: %s on a line of its own", we.Message, p.Field, p.Message)
		}
	}
	if len(d.Problems) > 1 && len(lines) != len(d.Problems)+1 {
		t.Errorf("message %q: want a header and %d problem lines", we.Message, len(d.Problems))
	}
	return d.Problems
}

func fields(ps []Problem) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Field
	}
	return out
}

func semanticJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseValidRoundTrips(t *testing.T) {
	m, err := Parse([]byte(validPack))
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := semanticJSON(t, out), semanticJSON(t, []byte(validPack)); !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %s\nwant %s", out, validPack)
	}
	m2, err := Parse(out)
	if err != nil {
		t.Fatalf("re-parse: %v", err)
	}
	if !reflect.DeepEqual(m2.PeerRequirements(), m.PeerRequirements()) {
		t.Errorf("re-parse changed the peer requirements")
	}
}

func TestParseRefusesBrokenFields(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(doc map[string]any)
		field string
	}{
		{"bad name", func(d map[string]any) { d["name"] = "Demo" }, "/name"},
		{"name without dot", func(d map[string]any) { d["name"] = "demo" }, "/name"},
		{"missing name", func(d map[string]any) { delete(d, "name") }, "/name"},
		{"bad version", func(d map[string]any) { d["version"] = "1.2" }, "/version"},
		{"version with leading zero", func(d map[string]any) { d["version"] = "01.2.0" }, "/version"},
		{"version not a string", func(d map[string]any) { d["version"] = 1 }, "/version"},
		{"kind", func(d map[string]any) { d["kind"] = "agent" }, "/kind"},
		{"missing language", func(d map[string]any) { delete(obj(d, "runtime"), "language") }, "/runtime/language"},
		{"missing entry", func(d map[string]any) { delete(obj(d, "runtime"), "entry") }, "/runtime/entry"},
		{"entry escapes", func(d map[string]any) { obj(d, "runtime")["entry"] = "../x" }, "/runtime/entry"},
		{"entry escapes midway", func(d map[string]any) { obj(d, "runtime")["entry"] = `bin\..\..\x` }, "/runtime/entry"},
		{"entry absolute", func(d map[string]any) { obj(d, "runtime")["entry"] = "/bin/sh" }, "/runtime/entry"},
		{"entry drive", func(d map[string]any) { obj(d, "runtime")["entry"] = `C:\x.exe` }, "/runtime/entry"},
		{"entry is the dir", func(d map[string]any) { obj(d, "runtime")["entry"] = "./" }, "/runtime/entry"},
		{"runtime not an object", func(d map[string]any) { d["runtime"] = "go" }, "/runtime"},
		{"no nodes or agents", func(d map[string]any) { delete(d, "nodes"); delete(d, "agents") }, "/nodes"},
		{"nodes not an array", func(d map[string]any) { d["nodes"] = "x" }, "/nodes"},
		{"node not an object", func(d map[string]any) { d["nodes"].([]any)[1] = 7 }, "/nodes/1"},
		{"duplicate typeId", func(d map[string]any) { node(d, 1)["typeId"] = "demo.summarize" }, "/nodes/1/typeId"},
		{"bad typeId", func(d map[string]any) { node(d, 1)["typeId"] = "Echo" }, "/nodes/1/typeId"},
		{"missing typeId", func(d map[string]any) { delete(node(d, 1), "typeId") }, "/nodes/1/typeId"},
		{"bad node version", func(d map[string]any) { node(d, 1)["version"] = "v1" }, "/nodes/1/version"},
		{"missing category", func(d map[string]any) { delete(node(d, 1), "category") }, "/nodes/1/category"},
		{"missing role", func(d map[string]any) { node(d, 1)["role"] = "" }, "/nodes/1/role"},
		{"bad peer dep key", func(d map[string]any) { obj(d, "peerDependencies")["kv"] = "required" }, "/peerDependencies/kv"},
		{"reserved vendor org", func(d map[string]any) { obj(d, "peerDependencies")["openwop.kv"] = "required" }, "/peerDependencies/openwop.kv"},
		{"facet as peer dep key", func(d map[string]any) { obj(d, "peerDependencies")["mcp.client"] = "required" }, "/peerDependencies/mcp.client"},
		{"legacy key without core family", func(d map[string]any) { obj(d, "peerDependencies")["host.chat"] = "supported" }, "/peerDependencies/host.chat"},
		{"bad peer dep value", func(d map[string]any) { obj(d, "peerDependencies")["mcp"] = "supported" }, "/peerDependencies/mcp"},
		{"peer dep value not a string", func(d map[string]any) { obj(d, "peerDependencies")["mcp"] = true }, "/peerDependencies/mcp"},
		{"meta without peer dep", func(d map[string]any) {
			obj(d, "peerDependenciesMeta")["promptLibrary"] = map[string]any{"optional": true}
		}, "/peerDependenciesMeta/promptLibrary"},
		{"bad meta facet", func(d map[string]any) {
			obj(d, "peerDependenciesMeta")["mcp"] = map[string]any{"facets": []any{"client", "a.b"}}
		}, "/peerDependenciesMeta/mcp/facets/1"},
		{"requires unknown core facet shape", func(d map[string]any) { node(d, 0)["requires"] = []any{"aiEnvelope.await.x"} }, "/nodes/0/requires/0"},
		{"requires empty facet", func(d map[string]any) { node(d, 0)["requires"] = []any{"promptLibrary", "aiEnvelope."} }, "/nodes/0/requires/1"},
		{"requires not a family", func(d map[string]any) { node(d, 0)["requires"] = []any{"chat"} }, "/nodes/0/requires/0"},
		{"requires empty", func(d map[string]any) { node(d, 0)["requires"] = []any{""} }, "/nodes/0/requires/0"},
		{"requires not an array", func(d map[string]any) { node(d, 0)["requires"] = "mcp" }, "/nodes/0/requires"},
		{"inputSchema bad keyword", func(d map[string]any) { node(d, 0)["inputSchema"] = map[string]any{"type": 5} }, "/nodes/0/inputSchema/type"},
		{"inputSchema not an object", func(d map[string]any) { node(d, 0)["inputSchema"] = "object" }, "/nodes/0/inputSchema"},
		{"inputSchema bad regexp", func(d map[string]any) {
			node(d, 0)["inputSchema"] = map[string]any{"type": "string", "pattern": "("}
		}, "/nodes/0/inputSchema/pattern"},
		{"inputSchema reaches a file", func(d map[string]any) {
			node(d, 0)["inputSchema"] = map[string]any{"$ref": "file:///etc/passwd"}
		}, "/nodes/0/inputSchema"},
		{"outputSchema bad keyword", func(d map[string]any) {
			node(d, 1)["outputSchema"] = map[string]any{"properties": map[string]any{"a": map[string]any{"minimum": "x"}}}
		}, "/nodes/1/outputSchema/properties/a/minimum"},
		{"unknown top-level field", func(d map[string]any) { d["color"] = "blue" }, "/color"},
		{"unknown field with slash", func(d map[string]any) { d["a/b~c"] = 1 }, "/a~1b~0c"},
		{"prompt ref not a string", func(d map[string]any) { obj(d, "prompts")["summary"] = 1 }, "/prompts/summary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse(variant(t, tt.edit))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", m)
			}
			ps := problemsOf(t, err)
			if !slices.Contains(fields(ps), tt.field) {
				t.Errorf("problems %+v do not name %s", ps, tt.field)
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	data := variant(t, func(d map[string]any) {
		d["name"] = "Bad Name"
		d["version"] = "one"
		d["kind"] = "agent"
		d["extra"] = true
		obj(d, "runtime")["entry"] = "../escape"
		node(d, 1)["typeId"] = "demo.summarize"
		node(d, 0)["requires"] = []any{"nope"}
	})
	_, err := Parse(data)
	got := fields(problemsOf(t, err))
	want := []string{"/extra", "/name", "/version", "/kind", "/runtime/entry", "/nodes/0/requires/0", "/nodes/1/typeId"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("problem fields = %v, want %v", got, want)
	}
}

func TestParseNotAnObject(t *testing.T) {
	for _, in := range []string{``, `[]`, `null`, `{"name":`, `{} {}`} {
		_, err := Parse([]byte(in))
		if ps := problemsOf(t, err); len(ps) != 1 || ps[0].Field != "" {
			t.Errorf("Parse(%q) problems = %+v, want one at the document", in, ps)
		}
	}
	big := make([]byte, MaxSize+1)
	if ps := problemsOf(t, func() error { _, err := Parse(big); return err }()); ps[0].Field != "" {
		t.Errorf("oversized: %+v", ps)
	}
}

// A syntax error is reported at pack.json:LINE:COL, the column counted in
// characters, and with the same position in details.problems.
func TestParseSyntaxErrorHasLineAndColumn(t *testing.T) {
	tests := []struct {
		name, in   string
		line, col  int
		wantPrefix string
	}{
		{"trailing comma", "{\n  \"name\": \"a.b\",\n}\n", 3, 1, "pack.json:3:1: is not valid JSON: invalid character '}'"},
		{"missing value", "{\n  \"name\": ,\n  \"kind\": \"node\"\n}", 2, 11, "pack.json:2:11: is not valid JSON: invalid character ','"},
		{"characters before", "{\"description\": \"ünï\" \"kind\": 1}", 1, 23, "pack.json:1:23: is not valid JSON: invalid character '\"' after object key:value pair"},
		{"ends early", "{\n  \"name\":", 2, 10, "pack.json:2:10: is not valid JSON: unexpected end of JSON input"},
		{"empty", "", 1, 1, "pack.json:1:1: is not valid JSON: unexpected end of JSON input"},
		{"not an object", "\n  [1, 2]", 2, 3, "pack.json:2:3: must be a JSON object, not an array"},
		{"null", "null", 1, 1, "pack.json:1:1: must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			ps := problemsOf(t, err)
			if len(ps) != 1 || ps[0].Line != tt.line || ps[0].Column != tt.col {
				t.Errorf("problems = %+v, want one at line %d column %d", ps, tt.line, tt.col)
			}
			if msg := wop.AsError(err).Message; !strings.HasPrefix(msg, tt.wantPrefix) {
				t.Errorf("message = %q, want it to start with %q", msg, tt.wantPrefix)
			}
		})
	}

	// Load names the file by its path, so the position can be opened.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("{\n  \"name\": \"a.b\",\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load(dir)
	if want := filepath.Join(dir, FileName) + ":3:1: "; !strings.HasPrefix(wop.AsError(err).Message, want) {
		t.Errorf("Load: %v, want the message to start with %q", err, want)
	}
}

// Several problems read as a list: a header with the count, then one
// "pointer: message" a line, while details.problems stays structured.
func TestParseListsOneProblemALine(t *testing.T) {
	data := variant(t, func(d map[string]any) {
		d["name"] = "Bad Name"
		d["kind"] = "agent"
		node(d, 0)["inputSchema"] = map[string]any{"type": 5}
	})
	_, err := Parse(data)
	ps := problemsOf(t, err)
	want := "pack.json is invalid (3 problems):\n" +
		"  /kind: must be \"node\"\n" +
		"  /name: must be reverse-DNS style, e.g. \"community.demo\"\n" +
		"  /nodes/0/inputSchema/type: is not valid JSON Schema: "
	msg := wop.AsError(err).Message
	sorted := strings.Split(msg, "\n")
	slices.Sort(sorted[1:])
	if got := strings.Join(sorted, "\n"); !strings.HasPrefix(got, want) {
		t.Errorf("message =\n%s\nwant it to start with\n%s", got, want)
	}
	if len(ps) != 3 {
		t.Errorf("details.problems = %+v, want 3", ps)
	}
	for _, p := range ps {
		if p.Field == "" || p.Line != 0 {
			t.Errorf("problem %+v: want a JSON pointer and no position", p)
		}
	}
}

func TestParseAllowsVendorHatch(t *testing.T) {
	data := variant(t, func(d map[string]any) {
		d["x-foo"] = 1
		d["openwop-bar"] = map[string]any{"a": 1}
		d["vendor.acme"] = []any{}
		d["$schema"] = "https://example.com/pack.schema.json"
	})
	m, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(m)
	if strings.Contains(string(out), "x-foo") {
		t.Errorf("vendor keys should be dropped, got %s", out)
	}
}

func TestParseNormalisesLegacyPeerDependencies(t *testing.T) {
	data := variant(t, func(d map[string]any) {
		d["peerDependencies"] = map[string]any{
			"host.aiEnvelope.await": "supported",
			"aiEnvelope":            "optional",
			"host.mcp":              "optional",
		}
		d["peerDependenciesMeta"] = map[string]any{"mcp": map[string]any{"facets": []any{"client"}}}
		node(d, 0)["requires"] = []any{"host.promptLibrary", "host.agents.manifestRuntime"}
	})
	m, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"aiEnvelope": "required", "mcp": "optional"}; !reflect.DeepEqual(m.PeerDependencies, want) {
		t.Errorf("PeerDependencies = %v, want %v", m.PeerDependencies, want)
	}
	wantMeta := map[string]PeerMeta{"aiEnvelope": {Facets: []string{"await"}}, "mcp": {Facets: []string{"client"}}}
	if !reflect.DeepEqual(m.PeerDependenciesMeta, wantMeta) {
		t.Errorf("PeerDependenciesMeta = %+v, want %+v", m.PeerDependenciesMeta, wantMeta)
	}
	if want := []string{"promptLibrary", "agents.manifestRuntime"}; !slices.Equal(m.Nodes[0].Requires, want) {
		t.Errorf("Requires = %v, want %v", m.Nodes[0].Requires, want)
	}
	want := []Requirement{
		{Family: "aiEnvelope"},
		{Family: "aiEnvelope", Facet: "await"},
		{Family: "mcp", Optional: true},
		{Family: "mcp", Facet: "client", Optional: true},
	}
	if got := m.PeerRequirements(); !reflect.DeepEqual(got, want) {
		t.Errorf("PeerRequirements = %+v, want %+v", got, want)
	}
}

func TestRequirements(t *testing.T) {
	m, err := Parse([]byte(validPack))
	if err != nil {
		t.Fatal(err)
	}

	wantPeer := []Requirement{
		{Family: "acme.kv"},
		{Family: "aiEnvelope"},
		{Family: "aiEnvelope", Facet: "await"},
		{Family: "mcp", Optional: true},
		{Family: "mcp", Facet: "client", Optional: true},
	}
	if got := m.PeerRequirements(); !reflect.DeepEqual(got, wantPeer) {
		t.Errorf("PeerRequirements = %+v, want %+v", got, wantPeer)
	}

	nodeTests := []struct {
		typeID string
		want   []string
	}{
		{"demo.summarize", []string{"acme.kv", "acme.kv.watch", "aiEnvelope", "aiEnvelope.await", "other.store.watch", "promptLibrary"}},
		{"demo.echo", []string{"acme.kv", "aiEnvelope", "aiEnvelope.await"}},
		{"demo.missing", nil},
	}
	for _, tt := range nodeTests {
		var got []string
		for _, r := range m.NodeRequirements(tt.typeID) {
			if r.Optional {
				t.Errorf("%s: %v is optional", tt.typeID, r)
			}
			got = append(got, r.String())
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("NodeRequirements(%s) = %v, want %v", tt.typeID, got, tt.want)
		}
	}
	// acme.kv.watch splits because acme.kv is declared; other.store.watch
	// stays whole because other.store is not.
	reqs := m.NodeRequirements("demo.summarize")
	if !slices.Contains(reqs, Requirement{Family: "acme.kv", Facet: "watch"}) ||
		!slices.Contains(reqs, Requirement{Family: "other.store.watch"}) {
		t.Errorf("vendor requires split wrongly: %+v", reqs)
	}

	declTests := []struct {
		typeID, family, facet string
		want                  bool
	}{
		{"demo.echo", "aiEnvelope", "", true},
		{"demo.echo", "aiEnvelope", "await", true},
		{"demo.echo", "mcp", "client", true}, // optional peers are declared too
		{"demo.echo", "mcp", "mrtr", false},
		{"demo.echo", "promptLibrary", "", false},
		{"demo.echo", "agentRuntime", "", false},
		{"demo.summarize", "promptLibrary", "", true},
		{"demo.summarize", "acme.kv", "watch", true},
		{"demo.summarize", "other.store.watch", "", true},
		{"demo.missing", "aiEnvelope", "", false},
	}
	for _, tt := range declTests {
		if got := m.Declared(tt.typeID)(tt.family, tt.facet); got != tt.want {
			t.Errorf("Declared(%s)(%s, %q) = %v, want %v", tt.typeID, tt.family, tt.facet, got, tt.want)
		}
	}

	if n, ok := m.Node("demo.echo"); !ok || n.Role != "pure" {
		t.Errorf("Node(demo.echo) = %+v, %v", n, ok)
	}
	if _, ok := m.Node("demo.missing"); ok {
		t.Error("Node(demo.missing) found")
	}
}

func TestRequiresFacetNamesFamily(t *testing.T) {
	m, err := Parse(variant(t, func(d map[string]any) {
		node(d, 1)["requires"] = []any{"agents.manifestRuntime"}
	}))
	if err != nil {
		t.Fatal(err)
	}
	decl := m.Declared("demo.echo")
	if !decl("agents", "") || !decl("agents", "manifestRuntime") {
		t.Error("a required facet should declare its family and itself")
	}
}

func violationsOf(t *testing.T, err error) []Violation {
	t.Helper()
	var we *wop.Error
	if !errors.As(err, &we) || we.Code != wop.CodeValidation {
		t.Fatalf("error %v is not a validation_error", err)
	}
	var d struct{ Errors []Violation }
	if err := json.Unmarshal(we.Details, &d); err != nil {
		t.Fatalf("details %s: %v", we.Details, err)
	}
	for _, v := range d.Errors {
		if v.Pointer != "" && !strings.Contains(we.Message, v.Pointer+": "+v.Message) {
			t.Errorf("message %q does not list %s", we.Message, v.Pointer)
		}
	}
	return d.Errors
}

func TestValidateInput(t *testing.T) {
	m, err := Parse([]byte(validPack))
	if err != nil {
		t.Fatal(err)
	}
	summarize, _ := m.Node("demo.summarize")
	echo, _ := m.Node("demo.echo")

	tests := []struct {
		name     string
		node     *Node
		input    string
		pointers []string // nil: valid
	}{
		{"valid", summarize, `{"name": "a", "age": 3}`, nil},
		{"missing and wrong type", summarize, `{"age": "three"}`, []string{"/age", "/name"}},
		{"both wrong types", summarize, `{"name": 5, "age": 1.5}`, []string{"/age", "/name"}},
		{"extra property", summarize, `{"name": "a", "age": 3, "x": 1}`, []string{"/x"}},
		{"not an object", summarize, `[]`, []string{""}},
		{"malformed", summarize, `{"name":`, []string{""}},
		{"trailing data", summarize, `{} {}`, []string{""}},
		{"empty", summarize, ``, []string{""}},
		{"no schema, any JSON", echo, `[1, "two"]`, nil},
		{"no schema, malformed", echo, `nope`, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.node.ValidateInput(json.RawMessage(tt.input))
			if tt.pointers == nil {
				if err != nil {
					t.Fatalf("ValidateInput: %v", err)
				}
				return
			}
			var got []string
			for _, v := range violationsOf(t, err) {
				got = append(got, v.Pointer)
			}
			if !slices.Equal(got, tt.pointers) {
				t.Errorf("pointers = %q, want %q (%v)", got, tt.pointers, err)
			}
		})
	}
}

func TestValidateOutput(t *testing.T) {
	m, err := Parse([]byte(validPack))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := m.Node("demo.summarize")
	if err := n.ValidateOutput(json.RawMessage(`{"summary": "x"}`)); err != nil {
		t.Errorf("ValidateOutput: %v", err)
	}
	if vs := violationsOf(t, n.ValidateOutput(json.RawMessage(`"x"`))); len(vs) != 1 {
		t.Errorf("violations = %+v", vs)
	}
}

func TestValidateBuiltInCode(t *testing.T) {
	m := &Manifest{
		Name: "community.built", Version: "1.0.0", Kind: "node",
		Runtime:          Runtime{Language: "go", Entry: "pack"},
		PeerDependencies: map[string]string{"host.aiEnvelope.await": "required"},
		Nodes: []Node{{
			TypeID: "built.one", Version: "1.0.0", Category: "data", Role: "pure",
			InputSchema: json.RawMessage(`{"type": "string"}`),
		}},
	}
	if err := m.Nodes[0].ValidateInput(json.RawMessage(`"x"`)); wop.CodeOf(err) != wop.CodeInternal {
		t.Errorf("uncompiled schema: err = %v, want internal", err)
	}

	bad := *m
	bad.Kind = "agent"
	if err := bad.Validate(); wop.CodeOf(err) != wop.CodePackValidationFailed {
		t.Fatalf("Validate = %v", err)
	}
	if _, ok := bad.PeerDependencies["host.aiEnvelope.await"]; !ok {
		t.Error("a refused manifest was changed")
	}

	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := m.Nodes[0].ValidateInput(json.RawMessage(`"x"`)); err != nil {
		t.Errorf("ValidateInput: %v", err)
	}
	if vs := violationsOf(t, m.Nodes[0].ValidateInput(json.RawMessage(`1`))); len(vs) != 1 || vs[0].Pointer != "" {
		t.Errorf("violations = %+v", vs)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, []byte(validPack), 0o600); err != nil {
		t.Fatal(err)
	}
	m, raw, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "community.demo" || string(raw) != validPack {
		t.Errorf("Load = %q, %d bytes", m.Name, len(raw))
	}

	_, _, err = Load(filepath.Join(dir, "missing"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join(dir, "missing", FileName)) {
		t.Errorf("missing dir: %v", err)
	}

	if err := os.WriteFile(path, []byte(`{"kind": "node"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = Load(dir)
	problemsOf(t, err)
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
}
