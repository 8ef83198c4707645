package packmanifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/wophost/wophost/sdk/wop"
)

const validPack = `{
  "name": "community.acme.demo",
  "version": "1.2.0",
  "kind": "node",
  "engines": {"openwop": ">=2.0 <3.0.0"},
  "description": "A demo pack",
  "runtime": {"language": "go", "entry": "bin/demo"},
  "peerDependencies": {"aiEnvelope": "required", "mcp": "optional", "acme.kv": "required"},
  "peerDependenciesMeta": {"aiEnvelope": {"facets": ["await"]}, "mcp": {"facets": ["client"]}},
  "nodes": [
    {
      "typeId": "demo.summarize", "version": "1.0.0", "category": "chat", "role": "pure",
      "x-wophost-requires": ["promptLibrary", "acme.kv.watch", "other.store.watch"],
      "inputSchemaRef": "schemas/summarize.input.json",
      "outputSchemaRef": "schemas/object.json"
    },
    {"typeId": "demo.echo", "version": "0.1.0-beta.1+build.5", "category": "data", "role": "pure"}
  ],
  "agents": [{"id": "helper"}],
  "x-wophost-prompts": {"summary": "demo/summary@1.0.0"}
}`

// validSchemas are the schema files validPack names.
var validSchemas = map[string]string{
	"schemas/summarize.input.json": `{
  "type": "object",
  "required": ["name", "age"],
  "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
  "additionalProperties": false
}`,
	"schemas/object.json": `{"type": "object"}`,
}

// packDir writes a pack directory holding manifest and files (path to
// content) and returns it.
func packDir(t *testing.T, manifest string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// loadValid loads validPack with its schema files.
func loadValid(t *testing.T) *Manifest {
	t.Helper()
	m, _, err := Load(packDir(t, validPack, validSchemas))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

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

// problemsOf checks that err is a manifest refusal (pack_validation_failed
// or one of the codes a problem may carry) and returns its problems.
func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	var we *wop.Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T) is not a *wop.Error", err, err)
	}
	switch we.Code {
	case wop.CodePackValidationFailed, CodePackKindInvalid, CodePackEngineUnsupported, CodePackPeerDependencyUndefined, CodeOAuthProviderUnsupported:
	default:
		t.Fatalf("code = %q, want a manifest refusal", we.Code)
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

// openWOPSchema compiles testdata/openwop-node-pack.schema.json, the tests'
// own statement of OpenWOP v2's manifest rules.
func openWOPSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("testdata", "openwop-node-pack.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// openWOPValid reports whether data passes the OpenWOP shape schema.
func openWOPValid(t *testing.T, sch *jsonschema.Schema, data []byte) error {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return sch.Validate(doc)
}

func TestParseValidRoundTrips(t *testing.T) {
	m, err := Parse([]byte(validPack))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Notes) != 0 {
		t.Errorf("notes for a pack using no unimplemented feature: %v", m.Notes)
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
	if err := openWOPValid(t, openWOPSchema(t), []byte(validPack)); err != nil {
		t.Errorf("validPack breaks the OpenWOP shape: %v", err)
	}
}

// Each rule refuses its manifest at its field, with its code and a message
// saying what is wrong. Rules of OpenWOP's format (openwop true) are also
// checked against the tests' OpenWOP schema, which must refuse the same
// manifest: the parser and the schema state the same format. The others
// are this host's refusals of valid OpenWOP manifests.
func TestParseRefusesBrokenFields(t *testing.T) {
	wasm := func(d map[string]any) { obj(d, "runtime")["language"] = "wasm" }
	tests := []struct {
		name    string
		edit    func(doc map[string]any)
		field   string
		code    string // "" for pack_validation_failed
		msg     string // a part of the message
		openwop bool
	}{
		{"bad name", func(d map[string]any) { d["name"] = "Demo" }, "/name", "", "scope", true},
		{"name of two segments", func(d map[string]any) { d["name"] = "community.kvdemo" }, "/name", "", `"community.acme.demo"`, true},
		{"name of an unknown scope", func(d map[string]any) { d["name"] = "test.acme.demo" }, "/name", "", "scope", true},
		{"name too long", func(d map[string]any) { d["name"] = "community.acme." + strings.Repeat("a", 250) }, "/name", "", "256", true},
		{"missing name", func(d map[string]any) { delete(d, "name") }, "/name", "", "required", true},
		{"bad version", func(d map[string]any) { d["version"] = "1.2" }, "/version", "", "semantic version", true},
		{"version not a string", func(d map[string]any) { d["version"] = 1 }, "/version", "", "must be a string", true},
		{"missing kind", func(d map[string]any) { delete(d, "kind") }, "/kind", "", `write "kind": "node"`, true},
		{"kind", func(d map[string]any) { d["kind"] = "workflow-chain" }, "/kind", CodePackKindInvalid, `write "kind": "node"`, true},
		{"missing engines", func(d map[string]any) { delete(d, "engines") }, "/engines", "", `"engines": {"openwop": ">=2.0 <3.0.0"}`, true},
		{"engines without a ceiling", func(d map[string]any) { d["engines"] = map[string]any{"openwop": ">=2.0"} }, "/engines/openwop", CodePackEngineUnsupported, `has no ceiling, which OpenWOP reads as "<2.0.0"`, true},
		{"engines v1 without a ceiling", func(d map[string]any) { d["engines"] = map[string]any{"openwop": ">=1.4"} }, "/engines/openwop", CodePackEngineUnsupported, `reads as "<2.0.0": it does not admit OpenWOP 2`, true},
		{"engines caret", func(d map[string]any) { d["engines"] = map[string]any{"openwop": "^2.0.0"} }, "/engines/openwop", "", "ceiling", true},
		{"engines missing openwop", func(d map[string]any) { d["engines"] = map[string]any{} }, "/engines/openwop", "", "required", true},
		{"engines closed", func(d map[string]any) { obj(d, "engines")["node"] = ">=20" }, "/engines/node", "", "not a known field", true},
		{"engines below 2", func(d map[string]any) { d["engines"] = map[string]any{"openwop": ">=1.0 <2.0.0"} }, "/engines/openwop", CodePackEngineUnsupported, "does not admit OpenWOP 2", false},
		{"engines above 2", func(d map[string]any) { d["engines"] = map[string]any{"openwop": ">=3 <4.0.0"} }, "/engines/openwop", CodePackEngineUnsupported, "does not admit OpenWOP 2", false},
		{"missing language", func(d map[string]any) { delete(obj(d, "runtime"), "language") }, "/runtime/language", "", "required", true},
		{"unknown language", func(d map[string]any) { obj(d, "runtime")["language"] = "rust" }, "/runtime/language", "", `"go"`, true},
		{"remote runtime", func(d map[string]any) { obj(d, "runtime")["language"] = "remote" }, "/runtime/language", "", "local executable", false},
		{"wasm component runtime", func(d map[string]any) { obj(d, "runtime")["language"] = "wasm-component" }, "/runtime/language", "", "component model", false},
		{"wasm runtime of another format", func(d map[string]any) { wasm(d); obj(d, "runtime")["format"] = "binary" }, "/runtime/format", "", `must be "wasm"`, false},
		{"wasm block (OpenWOP v1)", func(d map[string]any) { wasm(d); obj(d, "runtime")["wasm"] = map[string]any{"abiVersion": 1} }, "/runtime/wasm", "", "not a known field", true},
		{"runtime closed", func(d map[string]any) { obj(d, "runtime")["args"] = []any{} }, "/runtime/args", "", "not a known field", true},
		{"runtime format", func(d map[string]any) { obj(d, "runtime")["format"] = "elf" }, "/runtime/format", "", `"binary"`, true},
		{"runtime requires", func(d map[string]any) { obj(d, "runtime")["requires"] = []any{"net.inbound"} }, "/runtime/requires/0", "", `"net.dns"`, true},
		{"mcpServer without remote", func(d map[string]any) { obj(d, "runtime")["mcpServer"] = map[string]any{} }, "/runtime/mcpServer", "", "remote", true},
		{"missing entry", func(d map[string]any) { delete(obj(d, "runtime"), "entry") }, "/runtime/entry", "", "required", true},
		{"entry escapes", func(d map[string]any) { obj(d, "runtime")["entry"] = "../x" }, "/runtime/entry", "", `".."`, false},
		{"entry escapes midway", func(d map[string]any) { obj(d, "runtime")["entry"] = `bin\..\..\x` }, "/runtime/entry", "", `".."`, false},
		{"entry absolute", func(d map[string]any) { obj(d, "runtime")["entry"] = "/bin/sh" }, "/runtime/entry", "", "relative", false},
		{"entry drive", func(d map[string]any) { obj(d, "runtime")["entry"] = `C:\x.exe` }, "/runtime/entry", "", "relative", false},
		{"entry is the dir", func(d map[string]any) { obj(d, "runtime")["entry"] = "./" }, "/runtime/entry", "", "file", false},
		{"runtime not an object", func(d map[string]any) { d["runtime"] = "go" }, "/runtime", "", "object", true},
		{"no nodes or agents", func(d map[string]any) { delete(d, "nodes"); delete(d, "agents") }, "/nodes", "", "at least one", true},
		{"empty nodes and agents", func(d map[string]any) { d["nodes"] = []any{}; d["agents"] = []any{} }, "/nodes", "", "at least one", true},
		{"nodes not an array", func(d map[string]any) { d["nodes"] = "x" }, "/nodes", "", "array", true},
		{"node not an object", func(d map[string]any) { d["nodes"].([]any)[1] = 7 }, "/nodes/1", "", "object", true},
		{"duplicate typeId", func(d map[string]any) { node(d, 1)["typeId"] = "demo.summarize" }, "/nodes/1/typeId", "", "duplicates", false},
		{"bad typeId", func(d map[string]any) { node(d, 1)["typeId"] = "Echo" }, "/nodes/1/typeId", "", "dotted", true},
		{"typeId with a digit-led segment", func(d map[string]any) { node(d, 1)["typeId"] = "demo.2x" }, "/nodes/1/typeId", "", "dotted", true},
		{"missing typeId", func(d map[string]any) { delete(node(d, 1), "typeId") }, "/nodes/1/typeId", "", "required", true},
		{"bad node version", func(d map[string]any) { node(d, 1)["version"] = "v1" }, "/nodes/1/version", "", "semantic", false},
		{"missing category", func(d map[string]any) { delete(node(d, 1), "category") }, "/nodes/1/category", "", "required", true},
		{"unknown category", func(d map[string]any) { node(d, 1)["category"] = "misc" }, "/nodes/1/category", "", `"data"`, true},
		{"missing role", func(d map[string]any) { delete(node(d, 1), "role") }, "/nodes/1/role", "", "required", true},
		{"node closed", func(d map[string]any) { node(d, 1)["timeout"] = 5 }, "/nodes/1/timeout", "", `a host extension goes under a key starting with "x-"`, true},
		{"root closed", func(d map[string]any) { d["color"] = "blue" }, "/color", "", `a host extension goes under a key starting with "x-"`, true},
		{"unknown field with slash", func(d map[string]any) { d["a/b~c"] = 1 }, "/a~1b~0c", "", "not a known field", true},
		{"$schema", func(d map[string]any) { d["$schema"] = "https://example.com/s.json" }, "/$schema", "", "remove it", true},
		{"description too long", func(d map[string]any) { d["description"] = strings.Repeat("é", 1025) }, "/description", "", "1024", true},
		{"too many keywords", func(d map[string]any) { d["keywords"] = make([]any, 51) }, "/keywords", "", "50", true},
		{"keyword too long", func(d map[string]any) { d["keywords"] = []any{strings.Repeat("k", 65)} }, "/keywords/0", "", "64", true},
		{"dependencies", func(d map[string]any) { d["dependencies"] = map[string]any{"community.acme.base": "^1.0.0"} }, "/dependencies", "", "community.acme.base", false},
		{"dependency not a string", func(d map[string]any) { d["dependencies"] = map[string]any{"community.acme.base": 1} }, "/dependencies/community.acme.base", "", "string", true},
		{"bad peer dep key", func(d map[string]any) { obj(d, "peerDependencies")["kv"] = "required" }, "/peerDependencies/kv", CodePackPeerDependencyUndefined, "declares nothing: it is neither a core family", false},
		{"reserved vendor org", func(d map[string]any) { obj(d, "peerDependencies")["openwop.kv"] = "required" }, "/peerDependencies/openwop.kv", CodePackPeerDependencyUndefined, "the org openwop is reserved", false},
		{"unknown facet as peer dep key", func(d map[string]any) { obj(d, "peerDependencies")["mcp.server"] = "required" }, "/peerDependencies/mcp.server", CodePackPeerDependencyUndefined, `peerDependenciesMeta["mcp"].facets`, false},
		{"legacy key without core family", func(d map[string]any) { obj(d, "peerDependencies")["host.chat"] = "supported" }, "/peerDependencies/host.chat", CodePackPeerDependencyUndefined, "is not a v1 name OpenWOP still reads", false},
		{"empty peer dep value", func(d map[string]any) { obj(d, "peerDependencies")["mcp"] = "" }, "/peerDependencies/mcp", "", "empty", false},
		{"peer dep value not a string", func(d map[string]any) { obj(d, "peerDependencies")["mcp"] = true }, "/peerDependencies/mcp", "", "string", true},
		{"meta without peer dep", func(d map[string]any) {
			obj(d, "peerDependenciesMeta")["promptLibrary"] = map[string]any{"optional": true}
		}, "/peerDependenciesMeta/promptLibrary", "", "not declared", false},
		{"meta closed", func(d map[string]any) {
			obj(d, "peerDependenciesMeta")["mcp"] = map[string]any{"facets": []any{"client"}, "x-note": 1}
		}, "/peerDependenciesMeta/mcp/x-note", "", "not a known field", true},
		{"bad meta facet", func(d map[string]any) {
			obj(d, "peerDependenciesMeta")["mcp"] = map[string]any{"facets": []any{"client", "a.b"}}
		}, "/peerDependenciesMeta/mcp/facets/1", "", "facet", true},
		{"meta facets empty", func(d map[string]any) {
			obj(d, "peerDependenciesMeta")["mcp"] = map[string]any{"facets": []any{}}
		}, "/peerDependenciesMeta/mcp/facets", "", "at least 1", true},
		{"meta facets repeated", func(d map[string]any) {
			obj(d, "peerDependenciesMeta")["mcp"] = map[string]any{"facets": []any{"client", "client"}}
		}, "/peerDependenciesMeta/mcp/facets/1", "", "repeats", true},
		{"requires unknown core facet shape", func(d map[string]any) { node(d, 0)[RequiresKey] = []any{"aiEnvelope.await.x"} }, "/nodes/0/x-wophost-requires/0", "", "facet", false},
		{"requires empty facet", func(d map[string]any) { node(d, 0)[RequiresKey] = []any{"promptLibrary", "aiEnvelope."} }, "/nodes/0/x-wophost-requires/1", "", "facet", false},
		{"requires not a family", func(d map[string]any) { node(d, 0)[RequiresKey] = []any{"chat"} }, "/nodes/0/x-wophost-requires/0", "", "family", false},
		{"requires empty", func(d map[string]any) { node(d, 0)[RequiresKey] = []any{""} }, "/nodes/0/x-wophost-requires/0", "", "empty", false},
		{"requires not an array", func(d map[string]any) { node(d, 0)[RequiresKey] = "mcp" }, "/nodes/0/x-wophost-requires", "", "array", false},
		{"legacy node requires", func(d map[string]any) { node(d, 0)["requires"] = []any{"mcp"} }, "/nodes/0/requires", "", `write the same list as "x-wophost-requires"`, true},
		{"legacy inputSchema", func(d map[string]any) { node(d, 0)["inputSchema"] = map[string]any{} }, "/nodes/0/inputSchema",
			"", "inline schemas are not part of OpenWOP v2 manifests: put the schema in a file inside the pack and name it in inputSchemaRef", true},
		{"legacy outputSchema", func(d map[string]any) { node(d, 0)["outputSchema"] = map[string]any{} }, "/nodes/0/outputSchema", "", "outputSchemaRef", true},
		{"legacy root prompts", func(d map[string]any) { d["prompts"] = map[string]any{} }, "/prompts", "", `write the same map as "x-wophost-prompts"`, true},
		{"schema ref escapes", func(d map[string]any) { node(d, 0)["inputSchemaRef"] = "../schema.json" }, "/nodes/0/inputSchemaRef", "", `".."`, false},
		{"schema ref absolute", func(d map[string]any) { node(d, 0)["outputSchemaRef"] = "/etc/schema.json" }, "/nodes/0/outputSchemaRef", "", "relative", false},
		{"schema ref empty", func(d map[string]any) { node(d, 0)["configSchemaRef"] = "" }, "/nodes/0/configSchemaRef", "", "empty", false},
		{"schema ref not a string", func(d map[string]any) { node(d, 0)["inputSchemaRef"] = map[string]any{"type": "object"} }, "/nodes/0/inputSchemaRef", "", "string", true},
		{"label empty", func(d map[string]any) { node(d, 1)["label"] = "" }, "/nodes/1/label", "", "empty", true},
		{"capability trait", func(d map[string]any) { node(d, 1)["capabilities"] = []any{"fast"} }, "/nodes/1/capabilities/0", "", `"cacheable"`, true},
		{"outputs closed", func(d map[string]any) {
			node(d, 1)["outputs"] = map[string]any{"out": map[string]any{"masked": true}}
		}, "/nodes/1/outputs/out/masked", "", "not a known field", true},
		{"artifact closed", func(d map[string]any) { node(d, 1)["artifact"] = map[string]any{"path": "x"} }, "/nodes/1/artifact/path", "", "not a known field", true},
		{"mcp closed", func(d map[string]any) { node(d, 1)["mcp"] = map[string]any{"expose": true} }, "/nodes/1/mcp/expose", "", "not a known field", true},
		{"secret without kind", func(d map[string]any) {
			node(d, 1)["requiresSecrets"] = []any{map[string]any{"id": "key"}}
		}, "/nodes/1/requiresSecrets/0/kind", "", "required", true},
		{"credential closed", func(d map[string]any) {
			node(d, 1)["requiredCredentials"] = []any{map[string]any{"key": "k", "value": "secret"}}
		}, "/nodes/1/requiredCredentials/0/value", "", "not a known field", true},
		{"auth", func(d map[string]any) {
			node(d, 1)["auth"] = map[string]any{"type": "oauth2", "provider": "slack", "scopes": []any{"chat:write"}}
		}, "/nodes/1/auth", CodeOAuthProviderUnsupported, "OAuth", false},
		{"auth closed", func(d map[string]any) {
			node(d, 1)["auth"] = map[string]any{"type": "oauth2", "provider": "slack", "token": "t"}
		}, "/nodes/1/auth/token", "", "not a known field", true},
		{"model capability name", func(d map[string]any) {
			node(d, 1)["requiredModelCapabilities"] = []any{"Vision"}
		}, "/nodes/1/requiredModelCapabilities/0", "", "model capability", true},
		{"fallbackModel closed", func(d map[string]any) {
			node(d, 1)["fallbackModel"] = map[string]any{"provider": "anthropic", "model": "m", "temperature": 1}
		}, "/nodes/1/fallbackModel/temperature", "", "not a known field", true},
		{"signing scheme", func(d map[string]any) {
			d["signing"] = map[string]any{"keyId": "k1", "scheme": "tarball-sha256"}
		}, "/signing/scheme", "", `"ed25519-canonical-json"`, true},
		{"signing closed", func(d map[string]any) {
			d["signing"] = map[string]any{"keyId": "k1", "scheme": "ed25519-canonical-json", "publicKeyRef": "k.pub"}
		}, "/signing/publicKeyRef", "", "not a known field", true},
		{"connector needs a name", func(d map[string]any) { d["connector"] = map[string]any{"id": "kv"} }, "/connector/displayName", "", "required", true},
		{"connector action", func(d map[string]any) {
			d["connector"] = map[string]any{"id": "kv", "displayName": "KV", "actions": []any{map[string]any{"typeId": "demo.absent", "displayName": "Absent"}}}
		}, "/connector/actions/0/typeId", "", "names no node", false},
		{"connector oauth", func(d map[string]any) {
			d["connector"] = map[string]any{"id": "kv", "displayName": "KV", "auth": map[string]any{"type": "oauth2", "provider": "acme"}}
		}, "/connector/auth", CodeOAuthProviderUnsupported, "OAuth", false},
		{"prompt ref not a string", func(d map[string]any) { obj(d, PromptsKey)["summary"] = 1 }, "/x-wophost-prompts/summary", "", "string", false},
	}
	sch := openWOPSchema(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := variant(t, tt.edit)
			m, err := Parse(data)
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", m)
			}
			ps := problemsOf(t, err)
			i := slices.Index(fields(ps), tt.field)
			if i < 0 {
				t.Fatalf("problems %+v do not name %s", ps, tt.field)
			}
			if !strings.Contains(ps[i].Message, tt.msg) {
				t.Errorf("message %q does not say %q", ps[i].Message, tt.msg)
			}
			wantCode := tt.code
			if wantCode == "" {
				wantCode = wop.CodePackValidationFailed
			}
			if ps[i].Code != tt.code || wop.CodeOf(err) != wantCode {
				t.Errorf("codes: problem %q, error %q; want %q", ps[i].Code, wop.CodeOf(err), wantCode)
			}
			if err := openWOPValid(t, sch, data); tt.openwop != (err != nil) {
				t.Errorf("the OpenWOP schema disagrees (refuses: %v, want %v): %v", err != nil, tt.openwop, err)
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
		node(d, 0)[RequiresKey] = []any{"nope"}
		node(d, 0)["inputSchema"] = map[string]any{}
		delete(d, "engines")
	})
	_, err := Parse(data)
	got := fields(problemsOf(t, err))
	want := []string{"/extra", "/name", "/version", "/kind", "/engines", "/runtime/entry", "/nodes/0/x-wophost-requires/0", "/nodes/0/inputSchema", "/nodes/1/typeId"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("problem fields = %v, want %v", got, want)
	}
	// The kind's code wins over the others'.
	if c := wop.CodeOf(err); c != CodePackKindInvalid {
		t.Errorf("code = %q, want %q", c, CodePackKindInvalid)
	}
}

// A range admits the protocol major 2 when its lower bound is at most 2.x
// and its ceiling above 2.0.0.
func TestParseEnginesAdmitTheProtocolMajor(t *testing.T) {
	for rng, ok := range map[string]bool{
		">=2.0 <3.0.0":   true,
		">=2 <3.0.0":     true,
		">=2.4.1 <3.0.0": true,
		">=1.0 <3.0.0":   true,
		">=1 <4.0.0":     true,
		">=1.0 <2.0.0":   false,
		">=3.0 <4.0.0":   false,
		">=2.0 <2.0.0":   false,
		">=0.1 <1.0.0":   false,
	} {
		_, err := Parse(variant(t, func(d map[string]any) { d["engines"] = map[string]any{"openwop": rng} }))
		switch {
		case ok && err != nil:
			t.Errorf("%q refused: %v", rng, err)
		case !ok && wop.CodeOf(err) != CodePackEngineUnsupported:
			t.Errorf("%q: %v, want %s", rng, err, CodePackEngineUnsupported)
		}
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
	dir := packDir(t, "{\n  \"name\": \"a.b\",\n}\n", nil)
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
		"  /kind: is \"agent\"; this host loads node packs only: write \"kind\": \"node\"\n" +
		"  /name: must be a scope (core, vendor, community or private) and at least two lowercase-led segments, e.g. \"community.acme.demo\"\n" +
		"  /nodes/0/inputSchema: inline schemas are not part of OpenWOP v2 manifests"
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

// Keys under OpenWOP's vendor hatch, at the root and in a node, are
// ignored: no refusal, no note, no effect. A key that only looks like one
// of this host's own, differing in case, is someone else's and ignored
// too.
func TestParseIgnoresVendorHatchKeys(t *testing.T) {
	data := variant(t, func(d map[string]any) {
		d["x-foo"] = 1
		d["openwop-bar"] = map[string]any{"a": 1}
		d["vendor.acme.thing"] = []any{"anything"}
		d["x-WOPHOST-prompts"] = map[string]any{"no": "pin"}
		for _, i := range []int{0, 1} {
			node(d, i)["vendor.acme.thing"] = map[string]any{"requires": []any{"not a family"}}
			node(d, i)["x-foo"] = "bar"
			node(d, i)["x-Wophost-Requires"] = []any{"not a family"}
		}
	})
	m, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Parse([]byte(validPack))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(m)
	if want, _ := json.Marshal(ref); string(out) != string(want) || len(m.Notes) != 0 {
		t.Errorf("hatch keys changed the manifest:\n%s\nwant\n%s\nnotes %v", out, want, m.Notes)
	}
	if strings.Contains(string(out), "x-foo") || strings.Contains(string(out), "vendor.acme") {
		t.Errorf("vendor keys should be dropped, got %s", out)
	}
	if err := openWOPValid(t, openWOPSchema(t), data); err != nil {
		t.Errorf("the OpenWOP schema refuses hatch keys: %v", err)
	}
}

// The OpenWOP features this host reads without acting on load with a note
// each; authoring metadata loads quietly.
func TestParseNotesUnimplementedFeatures(t *testing.T) {
	quiet := variant(t, func(d map[string]any) {
		d["author"] = "Ada"
		d["license"] = "MIT"
		d["homepage"] = "https://example.com"
		d["repository"] = "https://example.com/git"
		d["keywords"] = []any{"demo"}
	})
	if m, err := Parse(quiet); err != nil || len(m.Notes) != 0 {
		t.Errorf("authoring metadata: %v, notes %v; want none", err, m)
	}
	data := variant(t, func(d map[string]any) {
		d["signing"] = map[string]any{"keyId": "k1", "scheme": "ed25519-canonical-json"}
		d["connector"] = map[string]any{"id": "kv", "displayName": "KV", "actions": []any{map[string]any{"typeId": "demo.echo", "displayName": "Echo"}}}
		obj(d, "runtime")["format"] = "binary"
		obj(d, "runtime")["minRuntimeVersion"] = "go>=1.22"
		obj(d, "runtime")["requires"] = []any{"net.outbound", "fs.read"}
		obj(d, "peerDependencies")["promptLibrary"] = "^2.0.0"
		n := node(d, 1)
		n["label"] = "Echo"
		n["capabilities"] = []any{"cacheable"}
		n["outputs"] = map[string]any{"out": map[string]any{"sensitive": true}}
		n["envelopeContractRef"] = "contracts/echo.json"
		n["artifact"] = map[string]any{"syncOn": "completion"}
		n["mcp"] = map[string]any{"exposeAsTool": true}
		n["configSchemaRef"] = "schemas/object.json"
		n["requiresSecrets"] = []any{map[string]any{"id": "key", "kind": "api-key"}}
		n["requiredModelCapabilities"] = []any{"structured-output"}
	})
	m, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range m.Notes {
		if n.Message == "" {
			t.Errorf("note %s has no message", n.Field)
		}
		got = append(got, n.Field)
	}
	want := []string{
		"/connector", "/runtime/format", "/runtime/minRuntimeVersion",
		"/peerDependencies/promptLibrary",
		"/nodes/1/label", "/nodes/1/capabilities", "/nodes/1/outputs/out/sensitive", "/nodes/1/envelopeContractRef",
		"/nodes/1/artifact", "/nodes/1/mcp", "/nodes/1/configSchemaRef", "/nodes/1", "/nodes/1/requiredModelCapabilities",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("notes at %v, want %v", got, want)
	}
	if err := openWOPValid(t, openWOPSchema(t), data); err != nil {
		t.Errorf("the OpenWOP schema refuses the features: %v", err)
	}
}

// Nodes that need what this host does not provide load, and each dispatch
// is refused before any pack code runs.
func TestDispatchRefusal(t *testing.T) {
	tests := []struct {
		name string
		set  map[string]any
		code string
	}{
		{"nothing needed", nil, ""},
		{"secrets", map[string]any{"requiresSecrets": []any{map[string]any{"id": "primary", "kind": "ai-provider", "provider": "anthropic"}}}, CodeCredentialUnavailable},
		{"credentials", map[string]any{"requiredCredentials": []any{map[string]any{"key": "slack-bot-token"}}}, CodeCredentialUnavailable},
		{"empty lists", map[string]any{"requiresSecrets": []any{}, "requiredCredentials": []any{}, "requiredModelCapabilities": []any{}}, ""},
		{"model capabilities", map[string]any{"requiredModelCapabilities": []any{"structured-output"}}, wop.CodeCapabilityNotProvided},
		{"model capabilities with a fallback", map[string]any{
			"requiredModelCapabilities": []any{"long-context"},
			"fallbackModel":             map[string]any{"provider": "anthropic", "model": "big"},
		}, wop.CodeCapabilityNotProvided},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse(variant(t, func(d map[string]any) {
				for k, v := range tt.set {
					node(d, 1)[k] = v
				}
			}))
			if err != nil {
				t.Fatal(err)
			}
			n, _ := m.Node("demo.echo")
			err = n.DispatchRefusal()
			if wop.CodeOf(err) != tt.code || (tt.code == "") != (err == nil) {
				t.Errorf("DispatchRefusal = %v, want code %q", err, tt.code)
			}
			if tt.code == CodeCredentialUnavailable && !strings.Contains(err.Error(), "demo.echo") {
				t.Errorf("refusal %q does not name the node", err)
			}
		})
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
		node(d, 0)[RequiresKey] = []any{"host.promptLibrary", "host.agents.manifestRuntime"}
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

// A peer value other than "optional" is required: OpenWOP hosts write
// version ranges there.
func TestParsePeerValuesOtherThanOptionalAreRequired(t *testing.T) {
	m, err := Parse(variant(t, func(d map[string]any) {
		d["peerDependencies"] = map[string]any{"aiEnvelope": "^2.0.0", "mcp": "optional", "promptLibrary": "*", "agents": "supported"}
		d["peerDependenciesMeta"] = map[string]any{}
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"aiEnvelope": Required, "mcp": Optional, "promptLibrary": Required, "agents": Required}
	if !reflect.DeepEqual(m.PeerDependencies, want) {
		t.Errorf("PeerDependencies = %v, want %v", m.PeerDependencies, want)
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
		node(d, 1)[RequiresKey] = []any{"agents.manifestRuntime"}
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
	m := loadValid(t)
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
	m := loadValid(t)
	n, _ := m.Node("demo.summarize")
	if err := n.ValidateOutput(json.RawMessage(`{"summary": "x"}`)); err != nil {
		t.Errorf("ValidateOutput: %v", err)
	}
	if vs := violationsOf(t, n.ValidateOutput(json.RawMessage(`"x"`))); len(vs) != 1 {
		t.Errorf("violations = %+v", vs)
	}
}

// Parse needs no directory: a manifest parsed alone refuses to check input
// against a schema it never read, and LoadSchemas reads it later.
func TestParseThenLoadSchemas(t *testing.T) {
	m, err := Parse([]byte(validPack))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := m.Node("demo.summarize")
	if err := n.ValidateInput(json.RawMessage(`{}`)); wop.CodeOf(err) != wop.CodeInternal || !strings.Contains(err.Error(), "inputSchemaRef") {
		t.Errorf("unloaded schema: err = %v, want internal naming inputSchemaRef", err)
	}
	if err := m.LoadSchemas(packDir(t, validPack, validSchemas)); err != nil {
		t.Fatal(err)
	}
	n, _ = m.Node("demo.summarize")
	if vs := violationsOf(t, n.ValidateInput(json.RawMessage(`{}`))); len(vs) != 2 {
		t.Errorf("violations = %+v, want name and age missing", vs)
	}
	// One file named by several nodes is compiled once.
	twice := strings.Replace(validPack, `"category": "data", "role": "pure"}`, `"category": "data", "role": "pure", "inputSchemaRef": "./schemas/summarize.input.json"}`, 1)
	m2, _, err := Load(packDir(t, twice, validSchemas))
	if err != nil {
		t.Fatal(err)
	}
	if m2.Nodes[0].input == nil || m2.Nodes[0].input != m2.Nodes[1].input {
		t.Error("a schema file named twice was compiled twice")
	}
}

// A schema reference is read inside the pack directory only, and must name
// a file holding a JSON Schema; each failure names the field and the file.
func TestLoadSchemasRefusesBadReferences(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.json")
	if err := os.WriteFile(outside, []byte(`{"type": "object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		files map[string]string
		setup func(t *testing.T, dir string)
		msg   string
	}{
		{"missing", map[string]string{"schemas/object.json": `{}`}, nil, `"schemas/summarize.input.json" does not exist in the pack directory`},
		{"not JSON", map[string]string{"schemas/summarize.input.json": `{"type":`, "schemas/object.json": `{}`}, nil, "is not valid JSON"},
		{"not an object", map[string]string{"schemas/summarize.input.json": `["object"]`, "schemas/object.json": `{}`}, nil, "must hold a JSON object"},
		{"bad keyword", map[string]string{"schemas/summarize.input.json": `{"type": 5}`, "schemas/object.json": `{}`}, nil, "is not valid JSON Schema: /type"},
		{"bad regexp", map[string]string{"schemas/summarize.input.json": `{"type": "string", "pattern": "("}`, "schemas/object.json": `{}`}, nil, "/pattern"},
		{"a directory", map[string]string{"schemas/summarize.input.json/x": `{}`, "schemas/object.json": `{}`}, nil, "not a regular file"},
		{"symlink out", map[string]string{"schemas/object.json": `{}`}, func(t *testing.T, dir string) {
			if err := os.Symlink(outside, filepath.Join(dir, "schemas", "summarize.input.json")); err != nil {
				t.Skip("no symbolic links:", err)
			}
		}, "leads outside the pack directory through a symbolic link"},
		{"symlinked directory out", map[string]string{"schemas/object.json": `{}`}, func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, "schemas"), filepath.Join(filepath.Dir(outside), "schemas")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(filepath.Dir(outside), "schemas", "summarize.input.json"), []byte(`{}`), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(filepath.Dir(outside), "schemas"), filepath.Join(dir, "schemas")); err != nil {
				t.Skip("no symbolic links:", err)
			}
		}, "leads outside the pack directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := packDir(t, validPack, tt.files)
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			_, _, err := Load(dir)
			ps := problemsOf(t, err)
			if wop.CodeOf(err) != wop.CodePackValidationFailed {
				t.Errorf("code %q", wop.CodeOf(err))
			}
			i := slices.Index(fields(ps), "/nodes/0/inputSchemaRef")
			if i < 0 || !strings.Contains(ps[i].Message, tt.msg) {
				t.Fatalf("problems %+v: want /nodes/0/inputSchemaRef saying %q", ps, tt.msg)
			}
			if !strings.HasPrefix(wop.AsError(err).Message, filepath.Join(dir, FileName)) {
				t.Errorf("error %q does not start with the manifest's path", err)
			}
		})
	}
	// A symbolic link that stays inside the pack is followed.
	dir := packDir(t, validPack, map[string]string{"schemas/object.json": `{}`, "real/summarize.json": `{"type": "object"}`})
	if err := os.Symlink(filepath.Join("..", "real", "summarize.json"), filepath.Join(dir, "schemas", "summarize.input.json")); err != nil {
		t.Skip("no symbolic links:", err)
	}
	if _, _, err := Load(dir); err != nil {
		t.Errorf("a link inside the pack: %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := packDir(t, validPack, validSchemas)
	m, raw, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "community.acme.demo" || string(raw) != validPack {
		t.Errorf("Load = %q, %d bytes", m.Name, len(raw))
	}

	_, _, err = Load(filepath.Join(dir, "missing"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join(dir, "missing", FileName)) {
		t.Errorf("missing dir: %v", err)
	}

	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, []byte(`{"kind": "node"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = Load(dir)
	problemsOf(t, err)
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
}

// moduleRoot is the repository's root, from this package's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

// Every pack.json of the repository is an OpenWOP v2 manifest, by the
// tests' own statement of the format, and loads here with its schema
// files.
func TestRepositoryPacksAreOpenWOPManifests(t *testing.T) {
	root := moduleRoot(t)
	sch := openWOPSchema(t)
	var found []string
	for _, top := range []string{"examples", "test"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != FileName {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			found = append(found, rel)
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if err := openWOPValid(t, sch, data); err != nil {
				t.Errorf("%s breaks the OpenWOP shape: %v", rel, err)
			}
			if _, _, err := Load(filepath.Dir(path)); err != nil {
				t.Errorf("%s does not load: %v", rel, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The packs the examples and the integration tests use, at least.
	for _, want := range []string{"examples/packs/kvdemo/pack.json", "examples/packs/greeter/pack.json", "examples/packs/council/pack.json",
		"test/packs/probe/pack.json", "test/packs/sibling/pack.json", "test/mcpservers/mcppack/pack.json"} {
		if !slices.Contains(found, filepath.FromSlash(want)) {
			t.Errorf("%s was not found; found %v", want, found)
		}
	}
}

// The tests' OpenWOP schema is itself a strict check: it refuses what the
// repository's packs looked like before OpenWOP v2 (inline schemas, node
// requires, root prompts, a two-segment name, no engines).
func TestOpenWOPSchemaRefusesTheOldShape(t *testing.T) {
	old := `{"name": "community.kvdemo", "version": "0.1.0", "kind": "node",
  "runtime": {"language": "go", "entry": "bin/kvdemo"},
  "prompts": {"a": "a@1"},
  "nodes": [{"typeId": "kvdemo.recall", "version": "0.1.0", "category": "data", "role": "pure",
    "requires": ["mcp.client"], "inputSchema": {"type": "object"}}]}`
	err := openWOPValid(t, openWOPSchema(t), []byte(old))
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("the old shape passes: %v", err)
	}
	var at []string
	for _, v := range violations(verr) {
		at = append(at, v.Pointer)
	}
	for _, want := range []string{"/name", "/engines", "/prompts", "/nodes/0/requires", "/nodes/0/inputSchema"} {
		if !slices.Contains(at, want) {
			t.Errorf("the schema does not refuse %s (refuses %v)", want, at)
		}
	}
}

// The runtime requirements the host grants by name are OpenWOP's, no more
// and no fewer.
func TestRuntimeRequirementsAreOpenWOPs(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "openwop-node-pack.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Items struct {
					Enum []string `json:"enum"`
				} `json:"items"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(src, &schema); err != nil {
		t.Fatal(err)
	}
	want := schema.Defs["runtime"].Properties["requires"].Items.Enum
	if len(want) == 0 {
		t.Fatal("the schema's runtime.requires enum was not found")
	}
	if got := RuntimeRequirements(); !slices.Equal(got, want) {
		t.Errorf("RuntimeRequirements() = %v, want the schema's %v", got, want)
	}
	if !IsRuntimeRequirement(RuntimeNetOutbound) || IsRuntimeRequirement("net.outbond") || IsRuntimeRequirement("") {
		t.Error("IsRuntimeRequirement disagrees with the vocabulary")
	}
}

// A WebAssembly pack's manifest is an ordinary one whose runtime names a
// module: it parses, and says it is one.
func TestParseWasmPack(t *testing.T) {
	for _, format := range []string{"", "wasm"} {
		var doc map[string]any
		if err := json.Unmarshal([]byte(validPack), &doc); err != nil {
			t.Fatal(err)
		}
		rt := obj(doc, "runtime")
		rt["language"], rt["entry"] = "wasm", "bin/demo.wasm"
		if format != "" {
			rt["format"] = format
		}
		data, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Parse(data)
		if err != nil {
			t.Fatalf("format %q: %v", format, err)
		}
		if !m.IsWasm() || m.Runtime.Entry != "bin/demo.wasm" {
			t.Errorf("format %q: IsWasm %v, entry %q", format, m.IsWasm(), m.Runtime.Entry)
		}
	}
}
