package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/core/packsign"
)

// The probe's validated.input.json, rewritten to take its definitions
// from another file of the pack, and that file.
const (
	refInputSchema = `{
  "type": "object",
  "required": ["name", "count"],
  "properties": {
    "name": {"$ref": "defs/common.json#/$defs/name"},
    "count": {"$ref": "./defs/../defs/common.json#/$defs/count"}
  }
}`
	refCommonSchema = `{"$defs": {"name": {"type": "string", "minLength": 1}, "count": {"type": "integer", "minimum": 1}}}`
)

// A pack's input schema that takes its definitions from another schema
// file of the pack is enforced through the real host: an input that
// fails a referenced definition is refused before the node runs, naming
// the field; one that passes runs.
func TestRunValidatesThroughASchemaReference(t *testing.T) {
	pack := probePack(t)
	writeFile(t, filepath.Join(pack, "schemas", "validated.input.json"), refInputSchema)
	if err := os.MkdirAll(filepath.Join(pack, "schemas", "defs"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(pack, "schemas", "defs", "common.json"), refCommonSchema)
	cfg := writeConfig(t, `host { plugin_dir = "BIN" }
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" {
  path = "`+pack+`"
  sandbox { enabled = false }
}
`)
	if res := runHost(t, "", "--config", cfg, "validate"); res.code != 0 {
		t.Fatalf("validate: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := runHost(t, `{"name":"Ada","count":2}`, "--config", cfg, "run", "probe.validated", "--input", "-"); res.code != 0 {
		t.Errorf("an input the referenced definitions accept: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	// minLength and minimum are only in defs/common.json.
	e := decodeRefusal(t, runHost(t, `{"name":"","count":0}`, "--config", cfg, "run", "probe.validated", "--input", "-"))
	var details struct {
		Errors []packmanifest.Violation `json:"errors"`
	}
	b, _ := json.Marshal(e.Details)
	if err := json.Unmarshal(b, &details); err != nil {
		t.Fatal(err)
	}
	if e.Error != "validation_error" || len(details.Errors) != 2 ||
		details.Errors[0].Pointer != "/count" || !strings.Contains(details.Errors[0].Message, "minimum") ||
		details.Errors[1].Pointer != "/name" || !strings.Contains(details.Errors[1].Message, "minLength") {
		t.Errorf("an input failing the referenced definitions: %+v, want validation_error at /count and /name", e)
	}
}

// Bad references are each named by their file and JSON pointer, all of
// them, at the pack block, by `host validate`, `host packs` and `host
// packs verify`, never by the compiler's internal address; the pack's
// nodes are not served.
func TestBadSchemaReferencesAreNamedEverywhere(t *testing.T) {
	pack := probePack(t)
	writeFile(t, filepath.Join(pack, "schemas", "validated.input.json"),
		strings.Replace(refInputSchema, `"defs/common.json#/$defs/name"`, `"../../etc/passwd"`, 1))
	if err := os.MkdirAll(filepath.Join(pack, "schemas", "defs"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(pack, "schemas", "defs", "common.json"),
		`{"$defs": {"count": {"$ref": "https://example.com/count.json"}}}`)
	keyFile, pub := signingKey(t, "acme-2026")
	signAsIs(t, keyFile, pack)
	cfg := writeConfigAsIs(t, fmt.Sprintf(`host { plugin_dir = %q }
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
trusted_key "acme-2026" {
  public_key = %q
  namespaces = ["private.wophost.*"]
}
pack "private.wophost.probe" { path = %q }
`, bin.dir, pub, pack))
	lines := []string{
		`schemas/validated.input.json: /properties/name/$ref: "../../etc/passwd" leaves the pack's directory`,
		`schemas/defs/common.json: /$defs/count/$ref: "https://example.com/count.json" is a remote URL`,
	}
	check := func(what, out string) {
		t.Helper()
		for _, l := range lines {
			if !strings.Contains(out, l) {
				t.Errorf("%s lacks %q:\n%s", what, l, out)
			}
		}
		if strings.Contains(out, "pack.invalid") {
			t.Errorf("%s shows the compiler's internal address:\n%s", what, out)
		}
	}

	val := runHost(t, "", "--config", cfg, "validate")
	if val.code != 1 || !strings.Contains(val.stderr, "host.hcl:10:1") || !strings.Contains(val.stderr, "pack_validation_failed") {
		t.Errorf("validate: exit %d, want 1 at the pack block host.hcl:10:1\n%s", val.code, val.stderr)
	}
	check("host validate", val.stderr)

	res := runHost(t, "", "--config", cfg, "--json", "packs")
	var packs []struct{ Name, State, Error string }
	if err := json.Unmarshal([]byte(res.stdout), &packs); err != nil || len(packs) != 1 {
		t.Fatalf("host packs: %v\n%s%s", err, res.stdout, res.stderr)
	}
	if packs[0].State != "refused" || !strings.HasPrefix(packs[0].Error, "pack_validation_failed: ") {
		t.Errorf("host packs: %+v, want refused", packs[0])
	}
	check("host packs", packs[0].Error)
	if e := decodeRefusal(t, runHost(t, `{"name":"x","count":1}`, "--config", cfg, "run", "probe.validated", "--input", "-")); e.Error != "not_found" {
		t.Errorf("run probe.validated in the refused pack: %+v, want not_found", e)
	}

	res = runHost(t, "", "--config", cfg, "--json", "packs", "verify", pack)
	var answers []verifyAnswer
	if err := json.Unmarshal([]byte(res.stdout), &answers); err != nil || len(answers) != 1 {
		t.Fatalf("packs verify: %v\n%s%s", err, res.stdout, res.stderr)
	}
	if a := answers[0]; res.code != 1 || a.Verified || a.Error == nil || a.Error.Code != "pack_validation_failed" {
		t.Fatalf("packs verify: exit %d, %+v, want pack_validation_failed: the signature holds, the schemas do not", res.code, a)
	}
	check("host packs verify", answers[0].Error.Message)
}

// signAsIs signs the pack in dir with keyFile as `host packs sign` does,
// digests of every file included, without loading its schemas first, as
// a signing tool other than the host's might.
func signAsIs(t *testing.T, keyFile, dir string) {
	t.Helper()
	id, key := readSigningKey(t, keyFile)
	raw, err := os.ReadFile(filepath.Join(dir, "pack.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	files, err := packsign.Digests(dir)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := os.ReadFile(filepath.Join(dir, doc["runtime"].(map[string]any)["entry"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(entry)
	doc[packmanifest.EntrySHA256Key] = hex.EncodeToString(sum[:])
	doc[packmanifest.FilesKey] = files
	doc["signing"] = map[string]any{"keyId": id, "scheme": packsign.Scheme}
	raw, _ = json.MarshalIndent(doc, "", "  ")
	sig, err := packsign.Sign(key, id, raw)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "pack.json"), string(raw))
	writeFile(t, filepath.Join(dir, "pack.sig.json"), string(sig.Marshal()))
}
