package docs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/core/packsign"
	"github.com/wophost/wophost/test/testbin"
)

// packSigningPath is the page on the pack rules and signatures.
const packSigningPath = "docs/pack-signing.md"

// TestPackSigningDocBlocks checks every fenced block of the page, in
// order, in one demo deployment: the sh transcripts run with their
// output compared line by line (a command whose output shows "not
// verified" must exit 1, any other 0); a JSON block is either a signature
// file, which must parse, or keys of pack.json, which the kvdemo pack's
// manifest must still parse with; the HCL block with the trusted key
// loads as a config and is then applied to the deployment's
// host.hcl.example, with the public key the transcript generated; the
// other HCL block loads with the policy it shows.
func TestPackSigningDocBlocks(t *testing.T) {
	root := moduleRoot(t)
	blocks := fencedBlocks(t, root, packSigningPath)
	if len(blocks) == 0 {
		t.Fatalf("%s has no code blocks", packSigningPath)
	}
	d := newDemo(t)
	ids := idMap{}
	for _, b := range blocks {
		name := fmt.Sprintf("%s:%d %s", packSigningPath, b.line, b.lang)
		ok := t.Run(name, func(t *testing.T) {
			switch b.lang {
			case "sh":
				if strings.Contains(b.text, loosenedMark) {
					defer d.loosenSchema(t)()
				}
				d.checkTranscriptStatus(t, ids, b.text)
			case "json":
				checkPackJSON(t, b.text)
			case "hcl":
				if strings.Contains(b.text, "trusted_key") {
					d.applyTrust(t, b.text)
				} else {
					checkPolicyBlock(t, b.text)
				}
			default:
				t.Errorf("a %q block: only sh, json and hcl blocks are checked, so only they may appear", b.lang)
			}
		})
		if !ok {
			t.Fatalf("%s failed; the blocks after it depend on it", name)
		}
	}

	// What the page left behind: the signed kvdemo pack loads, signed by
	// the key, and council, signed by a key not trusted for it, is
	// refused.
	out := d.mustRun(t, "bin/host --config host.hcl.example --log-level off --json packs")
	var packs []struct{ Name, State, Error, SignedBy string }
	if err := json.Unmarshal([]byte(out), &packs); err != nil {
		t.Fatalf("host packs: %v\n%s", err, out)
	}
	for _, p := range packs {
		switch p.Name {
		case "community.wophost.kvdemo":
			if p.State == "refused" || p.SignedBy != "acme-2026" {
				t.Errorf("kvdemo: %+v, want loaded, signed by acme-2026", p)
			}
		case "community.wophost.council":
			if p.State != "refused" || !strings.Contains(p.Error, "pack_signature_invalid") {
				t.Errorf("council: %+v, want refused with pack_signature_invalid", p)
			}
		}
	}
}

// loosenedMark marks the transcript of a pack whose schema changed after
// signing: the file the page says it replaced.
const loosenedMark = `"file": "schemas/remember.input.json"`

// loosenSchema replaces kvdemo's schema as the page says, and returns
// the function that puts the signed one back.
func (d *demo) loosenSchema(t *testing.T) func() {
	t.Helper()
	path := filepath.Join(d.root, "examples", "packs", "kvdemo", "schemas", "remember.input.json")
	signed, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"type": "object"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.WriteFile(path, signed, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkTranscriptStatus is checkTranscript for a page that also shows
// failing commands: a command whose shown output says "not verified" must
// exit 1.
func (d *demo) checkTranscriptStatus(t *testing.T, ids idMap, text string) {
	t.Helper()
	steps := transcript(text)
	if len(steps) == 0 {
		t.Fatal("an sh block without a \"$ \" command")
	}
	for _, s := range steps {
		cmd := ids.substitute(s.command)
		if !strings.HasPrefix(cmd, "bin/host ") {
			t.Fatalf("%q: transcripts run bin/host", s.command)
		}
		stdout, stderr, status := d.run(t, cmd)
		got := strings.Split(strings.TrimRight(stdout+stderr, "\n"), "\n")
		want := 0
		for _, line := range s.output {
			if strings.HasSuffix(line, ": not verified") {
				want = 1
			}
		}
		if status != want {
			t.Errorf("%s: exit status %d, want %d", cmd, status, want)
		}
		if err := ids.matchLines(s.output, got, d.root); err != nil {
			t.Errorf("%s: %v\nthe whole output:\n%s", s.command, err, strings.Join(got, "\n"))
		}
	}
}

// checkPackJSON checks a JSON block: a signature file parses; any other
// block holds pack.json keys, set on the kvdemo pack's manifest, which
// must still parse.
func checkPackJSON(t *testing.T, text string) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &fields); err != nil {
		t.Fatalf("not a JSON object: %v", err)
	}
	if _, ok := fields["signature"]; ok {
		if _, err := packsign.ParseSignature([]byte(text)); err != nil {
			t.Fatalf("the signature file does not parse: %v", err)
		}
		return
	}
	src, err := os.ReadFile(testbin.SourceDir("examples/packs/kvdemo/pack.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		doc[k] = v
	}
	merged, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := packmanifest.Parse(merged); err != nil {
		t.Fatalf("kvdemo's pack.json with these keys is refused: %v", err)
	}
}

// loadHCL loads text as a host config on its own.
func loadHCL(t *testing.T, text string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "host.hcl")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.NewLoader().Load(path)
	if diags.HasErrors() {
		t.Fatalf("the block does not load:\n%s", config.FormatDiagnostics(diags))
	}
	return cfg
}

// checkPolicyBlock loads the host-wide policy block: the host requires
// signatures, and its pack block turns that off for itself.
func checkPolicyBlock(t *testing.T, text string) {
	cfg := loadHCL(t, text)
	if !cfg.Host.RequireSignature || len(cfg.Packs) != 1 || cfg.Packs[0].RequireSignature {
		t.Errorf("host require_signature %v, packs %+v; want true, and false for the pack", cfg.Host.RequireSignature, cfg.Packs)
	}
}

var (
	publicKeyLine = regexp.MustCompile(`public_key = "[^"]*"`)
	kvdemoBlock   = regexp.MustCompile(`(?ms)^pack "community\.wophost\.kvdemo" \{\n.*?^\}\n`)
)

// applyTrust loads the operator's block, then puts it into the demo's
// host.hcl.example with the public key `host keys generate` wrote: its
// trusted_key block added, its kvdemo pack block in place of the
// example's.
func (d *demo) applyTrust(t *testing.T, text string) {
	cfg := loadHCL(t, text)
	if len(cfg.TrustedKeys) != 1 || len(cfg.Packs) != 1 || !cfg.Packs[0].RequireSignature {
		t.Fatalf("keys %d, packs %+v; want one key and a pack requiring a signature", len(cfg.TrustedKeys), cfg.Packs)
	}
	data, err := os.ReadFile(filepath.Join(d.root, "acme-2026.pub.json"))
	if err != nil {
		t.Fatalf("the public key the page's transcript generated: %v", err)
	}
	var pub packsign.PublicKeyFile
	if err := json.Unmarshal(data, &pub); err != nil {
		t.Fatal(err)
	}
	block := publicKeyLine.ReplaceAllString(text, fmt.Sprintf("public_key = %q", pub.PublicKey))
	i := strings.Index(block, `pack "community.wophost.kvdemo"`)
	if i < 0 {
		t.Fatal("the block has no kvdemo pack block")
	}
	trust, pack := block[:i], block[i:]
	path := filepath.Join(d.root, "host.hcl.example")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !kvdemoBlock.Match(src) {
		t.Fatal("host.hcl.example has no kvdemo pack block to replace")
	}
	src = kvdemoBlock.ReplaceAllLiteral(src, []byte(strings.TrimRight(pack, "\n")+"\n"))
	src = append(bytes.TrimRight(src, "\n"), []byte("\n\n"+trust)...)
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
}
