package config

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wophost/wophost/core/packsign"
)

// pubA is a valid public key in the config's form.
var pubA = packsign.EncodePublicKey(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey))

func TestTrustedKeysAndPolicy(t *testing.T) {
	f := newFixture(t, `
host {
  require_signature = true
}
trusted_key "acme-2026" {
  public_key = "`+pubA+`"
  namespaces = ["vendor.acme.*", "community.wophost.kvdemo"]
}
pack "community.wophost.kvdemo" { path = "packs/demo" }
pack "private.local.tools" {
  path              = "packs/demo"
  require_signature = false
}
`)
	cfg, _ := mustLoad(t, f)
	if !cfg.Host.RequireSignature {
		t.Error("host require_signature not read")
	}
	if !cfg.Packs[0].RequireSignature || cfg.Packs[1].RequireSignature {
		t.Errorf("packs' require_signature %v, %v; want true (the host's), false (its own)", cfg.Packs[0].RequireSignature, cfg.Packs[1].RequireSignature)
	}
	keys := cfg.SigningKeys()
	if len(keys) != 1 || keys[0].ID != "acme-2026" || packsign.EncodePublicKey(keys[0].Public) != pubA ||
		!keys[0].Permits("vendor.acme.tools") || !keys[0].Permits("community.wophost.kvdemo") || keys[0].Permits("community.wophost.council") {
		t.Errorf("keys %+v", keys)
	}
}

// Without a host setting, require_signature is off: the demo's unsigned
// example packs load.
func TestRequireSignatureOffByDefault(t *testing.T) {
	cfg, _ := mustLoad(t, newFixture(t, `pack "community.wophost.kvdemo" { path = "packs/demo" }`))
	if cfg.Host.RequireSignature || cfg.Packs[0].RequireSignature || len(cfg.TrustedKeys) != 0 {
		t.Errorf("defaults: host %v, pack %v, keys %d", cfg.Host.RequireSignature, cfg.Packs[0].RequireSignature, len(cfg.TrustedKeys))
	}
}

// Each mistake in a trusted_key block is reported at file:line:col, and
// the block then trusts nothing.
func TestTrustedKeyErrors(t *testing.T) {
	tests := []struct {
		name, src, summary, detail, at string
	}{
		{"bad id", `trusted_key "a b" {
  public_key = "` + pubA + `"
  namespaces = ["vendor.acme.*"]
}`, "Invalid trusted_key id", `got "a b"`, "host.hcl:1:1"},
		{"short key", `trusted_key "k" {
  public_key = "AAAA"
  namespaces = ["vendor.acme.*"]
}`, "Invalid public_key", "32 bytes in standard base64", "host.hcl:2:16"},
		{"missing key", `trusted_key "k" {
  namespaces = ["vendor.acme.*"]
}`, "Missing required argument", `"public_key" is required in trusted_key "k"`, "host.hcl:1:1"},
		{"missing namespaces", `trusted_key "k" {
  public_key = "` + pubA + `"
}`, "Missing required argument", `"namespaces" is required`, "host.hcl:1:1"},
		{"empty namespaces", `trusted_key "k" {
  public_key = "` + pubA + `"
  namespaces = []
}`, "Invalid namespaces", "at least one", "host.hcl:3:16"},
		{"namespace everything", `trusted_key "k" {
  public_key = "` + pubA + `"
  namespaces = ["vendor.acme.*", "*"]
}`, "Invalid namespaces", `Element 1 of namespaces, "*", must be a pack name`, "host.hcl:3:16"},
		{"namespace without scope", `trusted_key "k" {
  public_key = "` + pubA + `"
  namespaces = ["acme.*"]
}`, "Invalid namespaces", `"acme.*"`, "host.hcl:3:16"},
		{"duplicate", `trusted_key "k" {
  public_key = "` + pubA + `"
  namespaces = ["vendor.acme.*"]
}
trusted_key "k" {
  public_key = "` + pubA + `"
  namespaces = ["vendor.other.*"]
}`, "Duplicate trusted_key", "host.hcl:5:1; trusted_key names must be unique", "host.hcl:5:1"},
		{"require_signature not a bool", `host {
  require_signature = "yes"
}`, "Unsuitable value type", "", "host.hcl:2:23"},
		{"unknown attribute", `trusted_key "k" {
  public_key = "` + pubA + `"
  namespaces = ["vendor.acme.*"]
  expires    = "2027-01-01"
}`, "Unsupported argument", "expires", "host.hcl:4:3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.src)
			cfg, diags := NewLoader().Load(f.path)
			d := findDiag(diags, tt.summary)
			if d == nil {
				t.Fatalf("no %q diagnostic in %v", tt.summary, summaries(diags))
			}
			if !strings.Contains(d.Detail, tt.detail) {
				t.Errorf("detail %q does not say %q", d.Detail, tt.detail)
			}
			if at := strings.TrimPrefix(FormatRange(*d.Subject), f.dir+"/"); at != tt.at {
				t.Errorf("at %s, want %s", at, tt.at)
			}
			if tt.name != "duplicate" && tt.name != "require_signature not a bool" && tt.name != "unknown attribute" && len(cfg.TrustedKeys) != 0 {
				t.Errorf("a block with errors is trusted: %+v", cfg.TrustedKeys)
			}
		})
	}
}

// FuzzTrustBlock puts arbitrary bytes inside a trusted_key block and a
// require_signature attribute beside it. Nothing may panic; every error
// is placed in the file; a key that loads is a valid Ed25519 public key
// with namespaces that each pass CheckNamespace.
func FuzzTrustBlock(f *testing.F) {
	for _, s := range []string{
		`public_key = "` + pubA + `"
namespaces = ["vendor.acme.*"]`,
		`public_key = "` + pubA + `"
namespaces = ["*", "vendor.", "vendor..x", "community.a.b"]`,
		`public_key = 42
namespaces = "vendor.acme.*"`,
		`public_key = env("WOPHOST_FUZZ_UNSET")`,
		`namespaces = [null]`,
		`public_key = "` + pubA + `=="`,
		`trusted_key "nested" {}`,
	} {
		f.Add([]byte(s), "acme-2026", true)
	}
	dir := f.TempDir()
	path := filepath.Join(dir, "host.hcl")
	f.Fuzz(func(t *testing.T, body []byte, id string, require bool) {
		src := "host {\n  require_signature = " + map[bool]string{true: "true", false: "false"}[require] + "\n}\n" +
			"trusted_key " + quoteHCL(id) + " {\n" + string(body) + "\n}\n"
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, diags := NewLoader().Load(path)
		checkDiagnostics(t, path, diags)
		if cfg == nil {
			return
		}
		for _, k := range cfg.TrustedKeys {
			if len(k.PublicKey) != ed25519.PublicKeySize || !packsign.ValidKeyID(k.ID) || len(k.Namespaces) == 0 {
				t.Fatalf("accepted key %+v", k)
			}
			for _, ns := range k.Namespaces {
				if msg := packsign.CheckNamespace(ns); msg != "" {
					t.Fatalf("accepted namespace %q: %s", ns, msg)
				}
			}
		}
	})
}

// quoteHCL writes s as an HCL string literal, escaping what HCL would
// read as a template.
func quoteHCL(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\t", `\t`, "${", "$${", "%{", "%%{")
	return `"` + r.Replace(s) + `"`
}
