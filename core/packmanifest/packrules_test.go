package packmanifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

// The engines range: a ceiling, when written, decides; without one the
// range is read as "<2.0.0", which never admits OpenWOP 2.
func TestEnginesRange(t *testing.T) {
	tests := []struct {
		rng  string
		code string // "" when admitted
	}{
		{">=2.0 <3.0.0", ""},
		{">=2 <3.0.0", ""},
		{">=1.0.0 <4.0.0", ""},
		{">=2.1.3 <3.0.0", ""},
		{">=2.0", CodePackEngineUnsupported},
		{">=1", CodePackEngineUnsupported},
		{">=1.0 <2.0.0", CodePackEngineUnsupported},
		{">=3.0 <4.0.0", CodePackEngineUnsupported},
		{">=2.0 <2.0.0", CodePackEngineUnsupported},
		{">=2.0 <3.1.0", wop.CodePackValidationFailed},
		{"^2.0.0", wop.CodePackValidationFailed},
		{">=2.0  <3.0.0", wop.CodePackValidationFailed},
	}
	for _, tt := range tests {
		t.Run(tt.rng, func(t *testing.T) {
			_, err := Parse(variant(t, func(d map[string]any) { d["engines"] = map[string]any{"openwop": tt.rng} }))
			if got := wop.CodeOf(err); got != tt.code && !(tt.code == "" && err == nil) {
				t.Fatalf("code %q (%v), want %q", got, err, tt.code)
			}
			if tt.code == CodePackEngineUnsupported && !strings.Contains(err.Error(), "/engines/openwop") {
				t.Errorf("the refusal does not name /engines/openwop: %v", err)
			}
		})
	}
}

// A peerDependencies key that declares nothing is refused with
// pack_peer_dependency_undefined, naming the closest known key.
func TestPeerDependencyUndefined(t *testing.T) {
	tests := []struct {
		key, didYouMean, msg string
	}{
		{"aiEnvelop", "aiEnvelope", "declares nothing"},
		{"AIEnvelope", "aiEnvelope", "declares nothing"},
		{"promptLib", "", "declares nothing"},
		{"host.aiEnvelop", "host.aiEnvelope", "is not a v1 name OpenWOP still reads"},
		{"host.mcp.clients", "host.mcp.client", "is not a v1 name OpenWOP still reads"},
		{"mcp.clint", "mcp.client", `peerDependenciesMeta["mcp"].facets`},
		{"vendor.kv", "", "the org vendor is reserved"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			_, err := Parse(variant(t, func(d map[string]any) { obj(d, "peerDependencies")[tt.key] = "required" }))
			if wop.CodeOf(err) != CodePackPeerDependencyUndefined {
				t.Fatalf("code %q (%v), want %s", wop.CodeOf(err), err, CodePackPeerDependencyUndefined)
			}
			ps := problemsOf(t, err)
			want := Problem{Field: "/peerDependencies/" + tt.key, Code: CodePackPeerDependencyUndefined, DidYouMean: tt.didYouMean}
			if len(ps) != 1 || !strings.Contains(ps[0].Message, tt.msg) {
				t.Fatalf("problems %+v, want one saying %q", ps, tt.msg)
			}
			got := ps[0]
			got.Message = ""
			if got != want {
				t.Errorf("problem %+v, want %+v", got, want)
			}
			hint := `did you mean "` + tt.didYouMean + `"?`
			if shown := strings.Contains(err.Error(), hint); shown != (tt.didYouMean != "") {
				t.Errorf("message %q: shows %q %v, want %v", err, hint, shown, tt.didYouMean != "")
			}
		})
	}
}

// A well-formed vendor family is declared, whether or not a plugin serves
// it: that is checked at load, as pack_peer_dependency_missing.
func TestPeerDependencyVendorFamilyIsDeclared(t *testing.T) {
	m, err := Parse(variant(t, func(d map[string]any) { obj(d, "peerDependencies")["nobody.serves"] = "required" }))
	if err != nil {
		t.Fatal(err)
	}
	if m.PeerDependencies["nobody.serves"] != Required {
		t.Errorf("PeerDependencies = %v", m.PeerDependencies)
	}
}

// The v1 spellings of the alias table, "host." names and dotted facet
// paths alike, fold into their v2 family and facet.
func TestPeerDependencyV1Aliases(t *testing.T) {
	m, err := Parse(variant(t, func(d map[string]any) {
		d["peerDependencies"] = map[string]any{"mcp.client": "supported", "host.agents.manifestRuntime": "optional", "aiEnvelope.await": "required"}
		d["peerDependenciesMeta"] = map[string]any{}
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []Requirement{
		{Family: "agents", Optional: true}, {Family: "agents", Facet: "manifestRuntime", Optional: true},
		{Family: "aiEnvelope"}, {Family: "aiEnvelope", Facet: "await"},
		{Family: "mcp"}, {Family: "mcp", Facet: "client"},
	}
	if got := m.PeerRequirements(); !reflect.DeepEqual(got, want) {
		t.Errorf("PeerRequirements = %+v, want %+v", got, want)
	}
}

// The alias table file is well formed: closed, every alias naming a core
// family and a facet name, each core family reachable under "host.".
func TestV1AliasTable(t *testing.T) {
	data, err := os.ReadFile("v1aliases.json")
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Description string           `json:"description"`
		Aliases     map[string]alias `json:"aliases"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&table); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(table.Aliases, aliasTable) {
		t.Errorf("the embedded table differs from the file")
	}
	for name, a := range table.Aliases {
		if !wop.IsCoreFamily(a.Family) {
			t.Errorf("%s: family %q is not a core family", name, a.Family)
		}
		if a.Facet != "" && !facetPattern.MatchString(a.Facet) {
			t.Errorf("%s: facet %q is not a facet name", name, a.Facet)
		}
		if want := (Requirement{Family: a.Family, Facet: a.Facet}).String(); name != legacyPrefix+want && name != want {
			t.Errorf("%s stands for %s: a v1 name is host.<family>[.<facet>] or <family>.<facet>", name, want)
		}
	}
	for _, f := range wop.CoreFamilies() {
		if _, ok := table.Aliases[legacyPrefix+f]; !ok {
			t.Errorf("no v1 alias host.%s", f)
		}
	}
	if got := V1Aliases()["host.aiEnvelope.await"]; got != "aiEnvelope.await" {
		t.Errorf("V1Aliases()[host.aiEnvelope.await] = %q", got)
	}
}

// The entry digest is this host's hatch key: checked when present.
func TestEntrySHA256Key(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	m, err := Parse(variant(t, func(d map[string]any) { d[EntrySHA256Key] = sum }))
	if err != nil {
		t.Fatal(err)
	}
	if m.EntrySHA256 != sum {
		t.Errorf("EntrySHA256 = %q", m.EntrySHA256)
	}
	for _, bad := range []any{strings.ToUpper(sum), sum[:63], 7} {
		_, err := Parse(variant(t, func(d map[string]any) { d[EntrySHA256Key] = bad }))
		ps := problemsOf(t, err)
		if len(ps) != 1 || ps[0].Field != "/"+EntrySHA256Key {
			t.Errorf("%v: problems %+v", bad, ps)
		}
	}
}

// The file digest map is this host's hatch key: each value a digest. With
// it, a schema file is compiled only when the bytes read are the ones
// listed, so a file changed after its signature was checked is refused.
func TestFilesKeyPinsSchemas(t *testing.T) {
	sha := func(s string) string {
		h := sha256.Sum256([]byte(s))
		return hex.EncodeToString(h[:])
	}
	pins := map[string]string{}
	for name, content := range validSchemas {
		pins[name] = sha(content)
	}
	withPins := func(pins map[string]string) string {
		var doc map[string]any
		if err := json.Unmarshal([]byte(validPack), &doc); err != nil {
			t.Fatal(err)
		}
		doc[FilesKey] = pins
		b, _ := json.Marshal(doc)
		return string(b)
	}
	m, _, err := Load(packDir(t, withPins(pins), validSchemas))
	if err != nil {
		t.Fatalf("the listed files: %v", err)
	}
	if len(m.Files) != 2 || m.Files["schemas/object.json"] != sha(validSchemas["schemas/object.json"]) {
		t.Errorf("Files = %v", m.Files)
	}

	changed := map[string]string{"schemas/summarize.input.json": `{"type": "object"}`, "schemas/object.json": validSchemas["schemas/object.json"]}
	_, _, err = Load(packDir(t, withPins(pins), changed))
	want := `"schemas/summarize.input.json" is not the file x-wophost-files lists: its sha256 is ` + sha(`{"type": "object"}`) + ", not " + pins["schemas/summarize.input.json"]
	if ps := problemsOf(t, err); len(ps) != 1 || ps[0].Field != "/nodes/0/inputSchemaRef" || ps[0].Message != want {
		t.Errorf("a changed schema: problems %+v", ps)
	}

	unlisted := map[string]string{"schemas/object.json": pins["schemas/object.json"]}
	_, _, err = Load(packDir(t, withPins(unlisted), validSchemas))
	if ps := problemsOf(t, err); len(ps) != 1 || ps[0].Message != `"schemas/summarize.input.json" is not among the files x-wophost-files lists` {
		t.Errorf("an unlisted schema: problems %+v", ps)
	}

	for _, bad := range []any{map[string]any{"a": strings.Repeat("A", 64)}, map[string]any{"a": 1}, "x"} {
		_, err := Parse(variant(t, func(d map[string]any) { d[FilesKey] = bad }))
		ps := problemsOf(t, err)
		if len(ps) != 1 || !strings.HasPrefix(ps[0].Field, "/"+FilesKey) {
			t.Errorf("%v: problems %+v", bad, ps)
		}
	}
}
