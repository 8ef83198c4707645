package registry

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/wophost/wophost/sdk/wop"
)

// discoverySchema compiles testdata/openwop-discovery.schema.json, our
// restatement of OpenWOP's discovery rules.
func discoverySchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	s, err := jsonschema.NewCompiler().Compile("testdata/openwop-discovery.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, doc []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("%s: not JSON: %v", doc, err)
	}
	return s.Validate(v)
}

// The families as the host's plugins describe them.
var (
	aiEnvelopeAsync = Family{Name: wop.FamilyAIEnvelope, Status: "stable", Since: "2.0", Witness: "witnessable-gated",
		Facets: facets("await", `true`)}
	aiEnvelopeSync = Family{Name: wop.FamilyAIEnvelope, Status: "stable", Since: "2.0", Witness: "witnessable-gated"}
	promptLib      = Family{Name: wop.FamilyPromptLibrary, Status: "stable", Since: "2.0", Witness: "claims-check"}
	agentRuntime   = Family{Name: wop.FamilyAgentRuntime, Status: "stable", Since: "2.0", Witness: "claims-check",
		Needs: []string{wop.FamilyAIEnvelope}}
	agentsFamily = Family{Name: wop.FamilyAgents, Status: "stable", Since: "2.0", Witness: "witnessable-gated",
		Needs: []string{wop.FamilyAgentRuntime}, Facets: facets("manifestRuntime", `{"handoffValidation":true,"installScope":"host"}`)}
	mcpFamily = Family{Name: wop.FamilyMCP, Status: "stable", Since: "2.0", Witness: "seam-gated",
		Facets: facets("client", `true`, "revisions", `["2026-07-28","2025-11-25"]`, "preferredVersion", `"2026-07-28"`,
			"minimumRevision", `"2025-11-25"`, "refreshedAt", `"2026-11-29"`, "mrtr", `{"maxRounds":8}`),
		Details: json.RawMessage(`{"servers":["toolbox"]}`)}
	kvFamily = Family{Name: "acme.kv", Status: "experimental", Since: "2.0", Until: "2027-06-30", Witness: "claims-check"}
)

// The document the registry builds is valid by OpenWOP's rules in every
// configuration the host can be in.
func TestDocumentMatchesOpenWOPSchema(t *testing.T) {
	schema := discoverySchema(t)
	for _, tc := range []struct {
		name     string
		families []Family
		provide  bool // the host's own agents family
		contains []string
		lacks    []string
	}{
		{name: "every core family and a vendor family", families: []Family{aiEnvelopeAsync, promptLib, agentRuntime, mcpFamily, kvFamily}, provide: true,
			contains: []string{`"await":true`, `"client":true`, `"manifestRuntime":{`, `"extensions":{"acme.kv":{`, `"until":"2027-06-30"`},
			lacks:    []string{`"servers"`}},
		{name: "kv only", families: []Family{kvFamily}, provide: true, lacks: []string{`"agents"`, `"aiEnvelope"`}},
		{name: "empty", provide: true},
		{name: "aiEnvelope without await", families: []Family{aiEnvelopeSync}, lacks: []string{`"await"`}},
		{name: "mcp", families: []Family{mcpFamily}, contains: []string{`"mcp":{"status":"stable","since":"2.0","witness":"seam-gated","client":true,`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(Implementation{Name: "wophost", Version: "0.1.0"})
			if tc.provide {
				r.Provide(agentsFamily)
			}
			if len(tc.families) > 0 {
				serve(r, "cap", tc.families...)
			}
			doc := r.Document()
			if err := validate(t, schema, doc); err != nil {
				t.Fatalf("%s\nis not valid: %v", doc, err)
			}
			for _, s := range tc.contains {
				if !strings.Contains(string(doc), s) {
					t.Errorf("%s\nlacks %s", doc, s)
				}
			}
			for _, s := range tc.lacks {
				if strings.Contains(string(doc), s) {
					t.Errorf("%s\nhas %s", doc, s)
				}
			}
		})
	}
}

// The host's own record of the pack runtimes it runs sits at the root, in
// OpenWOP v2's shape, beside any families, and a new record replaces the
// old one.
func TestRootRecordMatchesOpenWOPSchema(t *testing.T) {
	schema := discoverySchema(t)
	r := New(Implementation{Name: "wophost", Version: "0.1.0"})
	serve(r, "cap", mcpFamily, kvFamily)
	wasm := func(loaded string) Family {
		return Family{Status: "stable", Since: "2.0", Witness: "claims-check",
			Facets: facets("wasm", `{"abiVersions":[1],"maxMemoryBytes":134217728,"loadedPacks":[`+loaded+`],"engine":"wazero"}`)}
	}
	r.SetRootRecord("nodePackRuntimes", wasm(``))
	r.SetRootRecord("nodePackRuntimes", wasm(`"community.acme.demo"`))
	doc := r.Document()
	if err := validate(t, schema, doc); err != nil {
		t.Fatalf("%s\nis not valid: %v", doc, err)
	}
	want := `"nodePackRuntimes":{"status":"stable","since":"2.0","witness":"claims-check","wasm":{"abiVersions":[1],"engine":"wazero","loadedPacks":["community.acme.demo"],"maxMemoryBytes":134217728}},"extensions":{`
	if !strings.Contains(string(doc), want) {
		t.Errorf("%s\nlacks %s", doc, want)
	}
	if _, listed := r.Advertised()["nodePackRuntimes"]; listed || r.Has("nodePackRuntimes", "") {
		t.Error("a root record is listed as an advertised family")
	}
}

// The schema refuses what OpenWOP refuses, the document's old shapes
// among them, so that a document passing it means something.
func TestDiscoverySchemaRefuses(t *testing.T) {
	schema := discoverySchema(t)
	const head = `{"protocolVersions":["2.0"],"preferredVersion":"2.0"`
	const mcpOK = `"status":"stable","since":"2.0","witness":"seam-gated","revisions":["2026-07-28"],"preferredVersion":"2026-07-28","minimumRevision":"2026-07-28","refreshedAt":"2026-11-29"`
	if err := validate(t, schema, []byte(head+`,"mcp":{`+mcpOK+`,"client":true}}`)); err != nil {
		t.Fatalf("a valid document refused: %v", err)
	}
	for name, doc := range map[string]string{
		"await as an object":        head + `,"aiEnvelope":{"status":"stable","since":"2.0","witness":"witnessable-gated","await":{}}}`,
		"client listing servers":    head + `,"mcp":{` + mcpOK + `,"client":{"servers":["toolbox"]}}}`,
		"mcp without revisions":     head + `,"mcp":{"status":"stable","since":"2.0","witness":"seam-gated","client":true}}`,
		"mrtr out of range":         head + `,"mcp":{` + mcpOK + `,"mrtr":{"maxRounds":17}}}`,
		"stable with until":         head + `,"promptLibrary":{"status":"stable","since":"2.0","until":"3.0","witness":"claims-check"}}`,
		"experimental, no until":    head + `,"promptLibrary":{"status":"experimental","since":"2.0","witness":"claims-check"}}`,
		"no witness":                head + `,"promptLibrary":{"status":"stable","since":"2.0"}}`,
		"a facet the record lacks":  head + `,"promptLibrary":{"status":"stable","since":"2.0","witness":"claims-check","store":"file"}}`,
		"unknown root key":          head + `,"acme.kv":{"status":"stable","since":"2.0","witness":"claims-check"}}`,
		"extension with two dots":   head + `,"extensions":{"acme.kv.x":{"status":"stable","since":"2.0","witness":"claims-check"}}}`,
		"no preferredVersion":       `{"protocolVersions":["2.0"]}`,
		"wasm without abiVersions":  head + `,"nodePackRuntimes":{"status":"stable","since":"2.0","witness":"claims-check","wasm":{"maxMemoryBytes":134217728}}}`,
		"wasm abiVersions empty":    head + `,"nodePackRuntimes":{"status":"stable","since":"2.0","witness":"claims-check","wasm":{"abiVersions":[]}}}`,
		"wasm memory below 1MiB":    head + `,"nodePackRuntimes":{"status":"stable","since":"2.0","witness":"claims-check","wasm":{"abiVersions":[1],"maxMemoryBytes":1048575}}}`,
		"wasm memory above 8GiB":    head + `,"nodePackRuntimes":{"status":"stable","since":"2.0","witness":"claims-check","wasm":{"abiVersions":[1],"maxMemoryBytes":8589934593}}}`,
		"runtimes with a stray key": head + `,"nodePackRuntimes":{"status":"stable","since":"2.0","witness":"claims-check","python":{}}}`,
	} {
		if validate(t, schema, []byte(doc)) == nil {
			t.Errorf("%s: accepted %s", name, doc)
		}
	}
}

// Details are listed with the capability's record, never advertised.
func TestDetailsListedNotAdvertised(t *testing.T) {
	r := New(Implementation{Name: "wophost", Version: "0.1.0"})
	serve(r, "mcp", mcpFamily)
	rec, _ := r.Record("mcp")
	if string(rec.Details[wop.FamilyMCP]) != `{"servers":["toolbox"]}` {
		t.Fatalf("record details %v", rec.Details)
	}
	if strings.Contains(string(r.Document()), "toolbox") {
		t.Fatalf("details advertised: %s", r.Document())
	}
	r.Fail("mcp", StateConfigured, nil)
	if rec, _ := r.Record("mcp"); rec.Details != nil {
		t.Fatalf("details of a failed capability: %v", rec.Details)
	}
}
