package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// openWOPPack lays out the agentpack binary, which reads the pack.json
// beside it, with manifest and the files given (path to content).
func openWOPPack(t *testing.T, manifest string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pack")
	files["pack.json"] = manifest
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.ReadFile(binary(t, "./test/plugins/agentpack"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agentpack"), exe, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// packHead starts a manifest of the agentpack binary named name.
func packHead(name, engines, kind string) string {
	return `{"name": "` + name + `", "version": "1.0.0", "kind": "` + kind + `", "engines": {"openwop": "` + engines + `"},
  "runtime": {"language": "go", "entry": "agentpack"}, "peerDependencies": {"test.echo": "required"},`
}

// A pack written to OpenWOP v2's format for any host loads: vendor hatch
// keys at the root and in a node change nothing, the features the host
// reads without acting on are listed as notes by host packs, a node needing
// secrets, credentials or model capabilities is refused at each dispatch
// before its input is even checked, and the packs whose features the host
// cannot honour are refused at load with OpenWOP's codes.
func TestOpenWOPPackFeaturesThroughTheHost(t *testing.T) {
	features := openWOPPack(t, packHead("vendor.acme.features", ">=2.0 <3.0.0", "node")+`
  "vendor.acme.thing": {"anything": true}, "x-foo": [1, 2],
  "nodes": [
    {"typeId": "features.plain", "version": "1.0.0", "category": "data", "role": "pure", "label": "Plain",
     "capabilities": ["cacheable"], "inputSchemaRef": "schemas/call.json",
     "vendor.acme.thing": "ignored", "x-foo": {"requires": ["nothing"]}},
    {"typeId": "features.secret", "version": "1.0.0", "category": "integration", "role": "side-effect",
     "inputSchemaRef": "schemas/call.json", "requiresSecrets": [{"id": "acme-key", "kind": "api-key"}]},
    {"typeId": "features.credential", "version": "1.0.0", "category": "integration", "role": "side-effect",
     "inputSchemaRef": "schemas/call.json", "requiredCredentials": [{"key": "slack-bot-token", "scope": "workspace"}]},
    {"typeId": "features.model", "version": "1.0.0", "category": "chat", "role": "pure",
     "inputSchemaRef": "schemas/call.json", "requiredModelCapabilities": ["structured-output"]}
  ]}`, map[string]string{"schemas/call.json": `{"type": "object", "required": ["family", "method"]}`})
	node := `"nodes": [{"typeId": "%s.x", "version": "1.0.0", "category": "data", "role": "pure"%s}]}`
	refused := map[string]struct{ dir, code string }{
		"vendor.acme.oauth": {openWOPPack(t, packHead("vendor.acme.oauth", ">=2.0 <3.0.0", "node")+
			strings.NewReplacer("%s.x", "oauth.x", "%s", `, "auth": {"type": "oauth2", "provider": "slack", "scopes": ["chat:write"]}`).Replace(node), map[string]string{}),
			"oauth_provider_unsupported"},
		"vendor.acme.old": {openWOPPack(t, packHead("vendor.acme.old", ">=1.0 <2.0.0", "node")+
			strings.NewReplacer("%s.x", "old.x", "%s", "").Replace(node), map[string]string{}), "pack_engine_unsupported"},
		"vendor.acme.chain": {openWOPPack(t, packHead("vendor.acme.chain", ">=2.0 <3.0.0", "workflow-chain")+
			strings.NewReplacer("%s.x", "chain.x", "%s", "").Replace(node), map[string]string{}), "pack_kind_invalid"},
		"vendor.acme.escape": {openWOPPack(t, packHead("vendor.acme.escape", ">=2.0 <3.0.0", "node")+
			strings.NewReplacer("%s.x", "escape.x", "%s", `, "inputSchemaRef": "../outside.json"`).Replace(node), map[string]string{}), "pack_validation_failed"},
		"vendor.acme.noceiling": {openWOPPack(t, packHead("vendor.acme.noceiling", ">=2.0", "node")+
			strings.NewReplacer("%s.x", "noceiling.x", "%s", "").Replace(node), map[string]string{}), "pack_engine_unsupported"},
		"vendor.acme.typo": {openWOPPack(t, strings.Replace(packHead("vendor.acme.typo", ">=2.0 <3.0.0", "node"), `"test.echo": "required"`, `"test.echo": "required", "aiEnvelop": "optional"`, 1)+
			strings.NewReplacer("%s.x", "typo.x", "%s", "").Replace(node), map[string]string{}), "pack_peer_dependency_undefined"},
		"vendor.acme.unsigned": {openWOPPack(t, packHead("vendor.acme.unsigned", ">=2.0 <3.0.0", "node")+
			`"signing": {"keyId": "acme-2026", "scheme": "ed25519-canonical-json"},`+
			strings.NewReplacer("%s.x", "unsigned.x", "%s", "").Replace(node), map[string]string{}), "pack_signature_invalid"},
	}
	extra := `pack "vendor.acme.features" { path = "` + features + `" }` + "\n"
	for name, r := range refused {
		extra += `pack "` + name + `" { path = "` + r.dir + `" }` + "\n"
	}
	cfg := probeConfig(t, extra)

	res := runHost(t, "", "--config", cfg, "--json", "packs")
	if res.code != 0 {
		t.Fatalf("host packs: exit %d\n%s", res.code, res.stderr)
	}
	var packs []struct {
		Name, State, Error string
		Notes              []struct{ Field, Message string }
	}
	if err := json.Unmarshal([]byte(res.stdout), &packs); err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for i, p := range packs {
		byName[p.Name] = i
	}
	f := packs[byName["vendor.acme.features"]]
	if f.State != "ready" || f.Error != "" {
		t.Fatalf("the OpenWOP pack: %+v, want ready", f)
	}
	notes := map[string]string{}
	for _, n := range f.Notes {
		notes[n.Field] = n.Message
	}
	for _, field := range []string{"/nodes/0/label", "/nodes/0/capabilities", "/nodes/1", "/nodes/2", "/nodes/3/requiredModelCapabilities"} {
		if notes[field] == "" {
			t.Errorf("no note at %s; notes %+v", field, f.Notes)
		}
	}
	if len(notes) != 5 {
		t.Errorf("notes %+v, want exactly the five features (hatch keys get none)", f.Notes)
	}
	if p := packs[byName["private.wophost.probe"]]; len(p.Notes) != 0 {
		t.Errorf("the probe pack, whose hatch keys are ignored, has notes: %+v", p.Notes)
	}
	for name, r := range refused {
		p := packs[byName[name]]
		if p.State != "refused" || !strings.Contains(p.Error, r.code) {
			t.Errorf("%s: %+v, want refused with %s", name, p, r.code)
		}
	}
	for name, want := range map[string]string{
		"vendor.acme.typo":      `/peerDependencies/aiEnvelop: declares nothing: it is neither a core family`,
		"vendor.acme.noceiling": `has no ceiling, which OpenWOP reads as "<2.0.0"`,
		"vendor.acme.unsigned":  `pack.json names the signing key "acme-2026" but`,
	} {
		if p := packs[byName[name]]; !strings.Contains(p.Error, want) {
			t.Errorf("%s: error %q does not say %q", name, p.Error, want)
		}
	}
	if p := packs[byName["vendor.acme.typo"]]; !strings.Contains(p.Error, `did you mean "aiEnvelope"?`) {
		t.Errorf("the misspelt peer dependency has no did-you-mean: %q", p.Error)
	}
	if text := runHost(t, "", "--config", cfg, "packs"); !strings.Contains(text.stdout, "note: vendor.acme.features /nodes/0/label: is not shown") {
		t.Errorf("host packs does not list the notes:\n%s", text.stdout)
	}

	// Dispatch: the input below fails the schema, so a refusal other than
	// validation_error came before the input check, and before pack code.
	for typeID, code := range map[string]string{
		"features.secret":     "credential_unavailable",
		"features.credential": "credential_unavailable",
		"features.model":      "capability_not_provided",
		"features.plain":      "validation_error",
	} {
		// Refused before any pack code ran: OpenWOP's envelope, not a run
		// outcome.
		if r := decodeRefusal(t, runHost(t, `{}`, "--config", cfg, "run", typeID, "--input", "-")); r.Error != code {
			t.Errorf("run %s: %+v, want %s", typeID, r, code)
		}
	}
	ok := runHost(t, `{"family":"test.echo","method":"echo","payload":{"a":1}}`, "--config", cfg, "run", "features.plain", "--input", "-")
	if ok.code != 0 || !strings.Contains(ok.stdout, `"a": 1`) {
		t.Errorf("run features.plain: exit %d\n%s%s", ok.code, ok.stdout, ok.stderr)
	}
}

// The probe pack, which every test here loads, carries vendor hatch keys
// at its root and in a node: they must stay there for those tests to prove
// that such keys are ignored.
func TestProbePackCarriesHatchKeys(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(probePack(t), "pack.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Foo   json.RawMessage `json:"x-foo"`
		Thing json.RawMessage `json:"vendor.acme.thing"`
		Nodes []struct {
			Foo   json.RawMessage `json:"x-foo"`
			Thing json.RawMessage `json:"vendor.acme.thing"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.Foo == nil || m.Thing == nil || len(m.Nodes) == 0 || m.Nodes[0].Foo == nil || m.Nodes[0].Thing == nil {
		t.Fatalf("the probe pack.json lost its hatch keys:\n%s", raw)
	}
	res := runHost(t, `{}`, "--config", probeConfig(t, ""), "run", "probe.echo", "--input", "-")
	if res.code != 0 {
		t.Errorf("run probe.echo: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}
