package integration

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/core/packsign"
	"github.com/wophost/wophost/test/testbin"
)

// signingKey generates the key pair id with `host keys generate` in a
// fresh directory and returns the private key file and the public key.
func signingKey(t *testing.T, id string) (keyFile, public string) {
	t.Helper()
	dir := t.TempDir()
	if res := runHost(t, "", "keys", "generate", id, "--dir", dir); res.code != 0 {
		t.Fatalf("keys generate: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	keyFile = filepath.Join(dir, id+".key.json")
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	data, err := os.ReadFile(filepath.Join(dir, id+".pub.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pub struct{ PublicKey string }
	if err := json.Unmarshal(data, &pub); err != nil || pub.PublicKey == "" {
		t.Fatalf("public key file %s: %v", data, err)
	}
	return keyFile, pub.PublicKey
}

// signPack signs the pack in dir with keyFile through `host packs sign`.
func signPack(t *testing.T, keyFile, dir string) {
	t.Helper()
	if res := runHost(t, "", "packs", "sign", "--key", keyFile, dir); res.code != 0 {
		t.Fatalf("packs sign %s: exit %d\n%s%s", dir, res.code, res.stdout, res.stderr)
	}
}

// flipManifestByte changes one byte of the pack's pack.json: a digit of
// its version.
func flipManifestByte(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "pack.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(`"version": "1.0.0"`))
	if i < 0 {
		t.Fatalf("%s has no version 1.0.0", path)
	}
	data[i+len(`"version": "1.0.`)] = '1'
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// verifyAnswer is `host packs verify --json`'s answer for one pack.
type verifyAnswer struct {
	Dir, Pack, KeyID string
	Verified         bool
	Error            *struct {
		Code    string
		Message string
		Details struct{ Reason, KeyID, File string }
	}
}

// The signed probe pack loads under a policy requiring signatures and
// verifies; each way to break the signature is refused, at load by
// `host packs` and by `host packs verify`, with pack_signature_invalid and
// the reason.
func TestSignedPacks(t *testing.T) {
	acmeKey, acmePub := signingKey(t, "acme-2026")
	narrowKey, narrowPub := signingKey(t, "narrow")
	strangerKey, _ := signingKey(t, "stranger")
	sibling := binary(t, "./test/packs/sibling")

	type variant struct {
		name    string
		prepare func(t *testing.T, dir string)
		reason  string // "" when the pack verifies
		message string
		file    string // the file the refusal names, if any
	}
	variants := []variant{
		{"signed", func(t *testing.T, dir string) { signPack(t, acmeKey, dir) }, "", "", ""},
		{"one byte of pack.json flipped", func(t *testing.T, dir string) {
			signPack(t, acmeKey, dir)
			flipManifestByte(t, dir)
		}, "bad_signature", `is not key "acme-2026"'s over pack.json: pack.json or the signature changed since the pack was signed`, ""},
		{"binary swapped", func(t *testing.T, dir string) {
			signPack(t, acmeKey, dir)
			exe, err := os.ReadFile(sibling)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "probe"), exe, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "entry_digest_mismatch", "the binary probe is not the one signed: its sha256 is", "probe"},
		{"key whose namespaces exclude the pack", func(t *testing.T, dir string) { signPack(t, narrowKey, dir) },
			"namespace_not_permitted", `key "narrow" may sign packs named private.other.*, not private.wophost.probe`, ""},
		{"key nobody trusts", func(t *testing.T, dir string) { signPack(t, strangerKey, dir) },
			"key_unknown", `which this host does not trust (no trusted_key "stranger" block)`, ""},
		{"unsigned", func(t *testing.T, dir string) {}, "unsigned", "the policy requires a signature (require_signature)", ""},
		{"a schema loosened", func(t *testing.T, dir string) {
			signPack(t, acmeKey, dir)
			writeFile(t, filepath.Join(dir, "schemas", "validated.input.json"), `{"type":"object"}`)
		}, "file_digest_mismatch", "the pack private.wophost.probe is not as signed: schemas/validated.input.json changed since signing", "schemas/validated.input.json"},
		{"a file added", func(t *testing.T, dir string) {
			signPack(t, acmeKey, dir)
			writeFile(t, filepath.Join(dir, "schemas", "extra.json"), `{}`)
		}, "file_not_signed", "schemas/extra.json was not signed (added since)", "schemas/extra.json"},
		{"a schema removed", func(t *testing.T, dir string) {
			signPack(t, acmeKey, dir)
			if err := os.Remove(filepath.Join(dir, "schemas", "call.input.json")); err != nil {
				t.Fatal(err)
			}
		}, "file_missing", "schemas/call.input.json, signed, is missing", "schemas/call.input.json"},
		{"a schema turned into a link", func(t *testing.T, dir string) {
			signPack(t, acmeKey, dir)
			path := filepath.Join(dir, "schemas", "call.input.json")
			if err := os.Rename(path, filepath.Join(dir, "call.input.json")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../call.input.json", path); err != nil {
				t.Fatal(err)
			}
		}, "file_not_regular", "schemas/call.input.json is a symbolic link", "schemas/call.input.json"},
		{"the signature file a link out of the pack", func(t *testing.T, dir string) {
			signPack(t, acmeKey, dir)
			sig := filepath.Join(dir, "pack.sig.json")
			outside := filepath.Join(t.TempDir(), "pack.sig.json")
			if err := os.Rename(sig, outside); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, sig); err != nil {
				t.Fatal(err)
			}
		}, "signature_file_invalid", "pack.sig.json is a symbolic link; it must be a regular file in the pack", ""},
		{"a signature of pack.json and the binary only", func(t *testing.T, dir string) {
			signPack(t, acmeKey, dir)
			signWithoutFiles(t, acmeKey, dir)
		}, "files_digest_missing", "has no x-wophost-files: its signature covers pack.json and the binary only", ""},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "probe")
			if err := testbin.LayOutPack("test/packs/probe", bin.probe, dir); err != nil {
				t.Fatal(err)
			}
			v.prepare(t, dir)
			// The keys are random base64, which may hold "BIN".
			cfg := writeConfigAsIs(t, fmt.Sprintf(`
host {
  plugin_dir        = %q
  require_signature = true
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
trusted_key "acme-2026" {
  public_key = %q
  namespaces = ["private.wophost.*"]
}
trusted_key "narrow" {
  public_key = %q
  namespaces = ["private.other.*"]
}
pack "private.wophost.probe" { path = %q }
`, bin.dir, acmePub, narrowPub, dir))

			res := runHost(t, "", "--config", cfg, "--json", "packs")
			var packs []struct{ Name, State, Error, SignedBy string }
			if err := json.Unmarshal([]byte(res.stdout), &packs); err != nil || len(packs) != 1 {
				t.Fatalf("host packs: %v\n%s%s", err, res.stdout, res.stderr)
			}
			p := packs[0]
			if v.reason == "" {
				if p.State == "refused" || p.Error != "" || p.SignedBy != "acme-2026" {
					t.Fatalf("the signed pack: %+v, want loaded, signed by acme-2026", p)
				}
				if r := runHost(t, `{"x":1}`, "--config", cfg, "run", "probe.echo", "--input", "-"); r.code != 0 {
					t.Errorf("run probe.echo: exit %d\n%s%s", r.code, r.stdout, r.stderr)
				}
				// The signed schema is the one enforced.
				if e := decodeRefusal(t, runHost(t, `{"count":0}`, "--config", cfg, "run", "probe.validated", "--input", "-")); e.Error != "validation_error" {
					t.Errorf("run probe.validated with input its schema refuses: %+v", e)
				}
			} else {
				if p.State != "refused" || !strings.HasPrefix(p.Error, "pack_signature_invalid: ") || !strings.Contains(p.Error, v.message) {
					t.Errorf("host packs: %+v, want refused with pack_signature_invalid saying %q", p, v.message)
				}
				if v.file != "" {
					if e := decodeRefusal(t, runHost(t, `{"count":0}`, "--config", cfg, "run", "probe.validated", "--input", "-")); e.Error != "not_found" {
						t.Errorf("run probe.validated in the refused pack: %+v, want not_found", e)
					}
				}
				// host validate reports it at the pack block.
				val := runHost(t, "", "--config", cfg, "validate")
				if val.code != 1 || !strings.Contains(val.stderr, "host.hcl:18:1") || !strings.Contains(val.stderr, "pack_signature_invalid") {
					t.Errorf("host validate: exit %d\n%s%s", val.code, val.stdout, val.stderr)
				}
			}

			res = runHost(t, "", "--config", cfg, "--json", "packs", "verify", dir)
			var answers []verifyAnswer
			if err := json.Unmarshal([]byte(res.stdout), &answers); err != nil || len(answers) != 1 {
				t.Fatalf("packs verify: %v\n%s%s", err, res.stdout, res.stderr)
			}
			a := answers[0]
			if v.reason == "" {
				if res.code != 0 || !a.Verified || a.KeyID != "acme-2026" || a.Pack != "private.wophost.probe" {
					t.Errorf("packs verify: exit %d, %+v", res.code, a)
				}
				return
			}
			if res.code != 1 || a.Verified || a.Error == nil || a.Error.Code != "pack_signature_invalid" || a.Error.Details.Reason != v.reason ||
				!strings.Contains(a.Error.Message, v.message) || a.Error.Details.File != v.file {
				t.Errorf("packs verify: exit %d, %+v (error %+v), want exit 1, pack_signature_invalid, reason %s", res.code, a, a.Error, v.reason)
			}
		})
	}
}

// writeFile writes content to path.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// signWithoutFiles signs the pack in dir again as a signature of the
// format before signatures covered every file did: pack.json without its
// file digest map, the binary through its digest.
func signWithoutFiles(t *testing.T, keyFile, dir string) {
	t.Helper()
	id, key := readSigningKey(t, keyFile)
	raw, err := os.ReadFile(filepath.Join(dir, "pack.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc[packmanifest.FilesKey] == nil {
		t.Fatalf("the signed pack.json has no %s", packmanifest.FilesKey)
	}
	delete(doc, packmanifest.FilesKey)
	raw, _ = json.MarshalIndent(doc, "", "  ")
	sig, err := packsign.Sign(key, id, raw)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "pack.json"), string(raw))
	writeFile(t, filepath.Join(dir, "pack.sig.json"), string(sig.Marshal()))
}

// `host packs sign` refuses a private key file others may read.
func TestSignRefusesAKeyOthersMayRead(t *testing.T) {
	key, _ := signingKey(t, "acme-2026")
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "probe")
	if err := testbin.LayOutPack("test/packs/probe", bin.probe, dir); err != nil {
		t.Fatal(err)
	}
	res := runHost(t, "", "packs", "sign", "--key", key, dir)
	if res.code != 1 || !strings.Contains(res.stderr, "may be read or written by others (mode -rw-r--r--): chmod 600 it") {
		t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "pack.sig.json")); err == nil {
		t.Error("a signature was written")
	}
}

// A reload re-verifies every pack: the one whose signature broke since
// is refused with the reason, and the rest of the reload goes ahead, the
// other signed pack serving.
func TestReloadRefusesAPackWhoseSignatureBroke(t *testing.T) {
	key, pub := signingKey(t, "acme-2026")
	dir := t.TempDir()
	probe, kvdemo := filepath.Join(dir, "probe"), filepath.Join(dir, "kvdemo")
	if err := testbin.LayOutPack("test/packs/probe", bin.probe, probe); err != nil {
		t.Fatal(err)
	}
	if err := testbin.LayOutPack("examples/packs/kvdemo", binary(t, "./examples/packs/kvdemo"), kvdemo); err != nil {
		t.Fatal(err)
	}
	signPack(t, key, probe)
	signPack(t, key, kvdemo)
	// The key is random base64, which may hold "BIN".
	cfg := writeConfigAsIs(t, fmt.Sprintf(`
host {
  plugin_dir        = %q
  state_dir         = %q
  require_signature = true
  http {
    listen = "127.0.0.1:0"
  }
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "kv" {
  plugin = "wophost-kv"
}
trusted_key "acme-2026" {
  public_key = %q
  namespaces = ["private.wophost.*", "community.wophost.kvdemo"]
}
pack "private.wophost.probe" { path = %q }
pack "community.wophost.kvdemo" { path = %q }
`, bin.dir, filepath.Join(dir, "state"), pub, probe, kvdemo))
	d := startServe(t, cfg)
	packStates := func() map[string]string {
		r := request(t, "GET", d.base+"/v1/packs", "", nil)
		var packs []struct{ Name, State, Error string }
		if err := json.Unmarshal([]byte(r.body), &packs); err != nil {
			t.Fatalf("GET /v1/packs: %d %s", r.status, r.body)
		}
		out := map[string]string{}
		for _, p := range packs {
			out[p.Name] = p.State + " " + p.Error
		}
		return out
	}
	if s := packStates(); !strings.HasPrefix(s["private.wophost.probe"], "degraded") || !strings.HasPrefix(s["community.wophost.kvdemo"], "degraded") {
		t.Fatalf("before the reload: %v", s)
	}
	if r := request(t, "POST", d.base+"/v1/nodes/probe.echo:execute", `{"input":{"ok":true}}`, nil); r.status != 200 {
		t.Fatalf("probe.echo before the reload: %d %s", r.status, r.body)
	}

	flipManifestByte(t, probe)
	if got := d.reloadAndWait(t, 1); got != "reloaded" {
		t.Fatalf("reload: %s\n%s", got, d.log())
	}
	s := packStates()
	if got := s["private.wophost.probe"]; !strings.HasPrefix(got, "refused pack_signature_invalid: ") || !strings.Contains(got, "changed since the pack was signed") {
		t.Errorf("the broken pack after the reload: %q", got)
	}
	if !strings.HasPrefix(s["community.wophost.kvdemo"], "degraded") {
		t.Errorf("the other pack after the reload: %q", s["community.wophost.kvdemo"])
	}
	if !strings.Contains(d.log(), "pack refused at the reload: its signature no longer verifies: pack=private.wophost.probe") {
		t.Errorf("the log does not say why the pack was refused:\n%s", d.log())
	}
	if r := request(t, "POST", d.base+"/v1/nodes/probe.echo:execute", `{"input":{"ok":true}}`, nil); r.status != 404 {
		t.Errorf("probe.echo after the reload: %d %s, want 404", r.status, r.body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := request(t, "POST", d.base+"/v1/nodes/kvdemo.remember:execute", `{"input":{"key":"k","value":"v"}}`, nil)
		if succeeded(r.status, r.body) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kvdemo.remember after the reload: %d %s", r.status, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d:\n%s", code, d.log())
	}
}

// A served host refuses a signed pack one of whose schemas was loosened
// since signing: GET /v1/packs names the file, and the input the vendor's
// schema refuses is never run.
func TestServeRefusesAPackWhoseSchemaChanged(t *testing.T) {
	key, pub := signingKey(t, "acme-2026")
	dir := t.TempDir()
	kvdemo := filepath.Join(dir, "kvdemo")
	if err := testbin.LayOutPack("examples/packs/kvdemo", binary(t, "./examples/packs/kvdemo"), kvdemo); err != nil {
		t.Fatal(err)
	}
	signPack(t, key, kvdemo)
	writeFile(t, filepath.Join(kvdemo, "schemas", "remember.input.json"), `{"type":"object"}`)
	cfg := writeConfigAsIs(t, fmt.Sprintf(`
host {
  plugin_dir        = %q
  state_dir         = %q
  require_signature = true
  http {
    listen = "127.0.0.1:0"
  }
}
capability "kv" {
  plugin = "wophost-kv"
}
trusted_key "acme-2026" {
  public_key = %q
  namespaces = ["community.wophost.kvdemo"]
}
pack "community.wophost.kvdemo" { path = %q }
`, bin.dir, filepath.Join(dir, "state"), pub, kvdemo))
	d := startServe(t, cfg)
	r := request(t, "GET", d.base+"/v1/packs", "", nil)
	var packs []struct{ Name, State, Error, SignedBy string }
	if err := json.Unmarshal([]byte(r.body), &packs); err != nil || len(packs) != 1 {
		t.Fatalf("GET /v1/packs: %d %s", r.status, r.body)
	}
	if p := packs[0]; p.State != "refused" || p.SignedBy != "" ||
		!strings.HasPrefix(p.Error, "pack_signature_invalid: the pack community.wophost.kvdemo is not as signed: schemas/remember.input.json changed since signing") {
		t.Errorf("GET /v1/packs: %+v", p)
	}
	if r := request(t, "POST", d.base+"/v1/nodes/kvdemo.remember:execute", `{"input":{"key":"","extra":1}}`, nil); r.status != 404 {
		t.Errorf("kvdemo.remember with input its signed schema refuses: %d %s, want 404", r.status, r.body)
	}
	res := runHost(t, "", "--config", cfg, "packs", "verify", kvdemo)
	if res.code != 1 || !strings.Contains(res.stdout, `"reason": "file_digest_mismatch"`) || !strings.Contains(res.stdout, `"file": "schemas/remember.input.json"`) {
		t.Errorf("packs verify: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d:\n%s", code, d.log())
	}
}

// readSigningKey reads the private key file `host keys generate` wrote.
func readSigningKey(t *testing.T, keyFile string) (string, ed25519.PrivateKey) {
	t.Helper()
	data, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	id, key, err := packsign.ParsePrivateKey(data)
	if err != nil {
		t.Fatal(err)
	}
	return id, key
}
