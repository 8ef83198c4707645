package packsign

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/sdk/wop"
)

// seededKey is a key pair derived from a fixed seed byte, so that tests
// need no randomness.
func seededKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

const digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// manifestJSON is a signed-looking pack.json of the pack name, naming
// keyID, with the entry digest unless it is "" and an empty file digest
// map: the pack holds pack.json and its signature only. manifestWith
// takes the map, nil for none.
func manifestJSON(name, keyID, sum string) []byte {
	return manifestWith(name, keyID, sum, map[string]string{})
}

func manifestWith(name, keyID, sum string, files map[string]string) []byte {
	doc := map[string]any{
		"name": name, "version": "1.0.0", "kind": "node",
		"engines": map[string]any{"openwop": ">=2.0 <3.0.0"},
		"runtime": map[string]any{"language": "go", "entry": "bin/pack"},
		"nodes":   []any{map[string]any{"typeId": "demo.echo", "version": "1.0.0", "category": "data", "role": "pure"}},
	}
	if keyID != "" {
		doc["signing"] = map[string]any{"keyId": keyID, "scheme": Scheme}
	}
	if sum != "" {
		doc[packmanifest.EntrySHA256Key] = sum
	}
	if files != nil {
		doc[packmanifest.FilesKey] = files
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	return b
}

// signedPack writes pack.json (raw) and, when key is not nil, its
// signature by key under keyID, into a fresh directory.
func signedPack(t *testing.T, raw []byte, keyID string, key ed25519.PrivateKey) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, packmanifest.FileName), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if key != nil {
		sig, err := Sign(key, keyID, raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, FileName), sig.Marshal(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func verify(t *testing.T, dir string, keys []Key, require bool) (*Verified, error) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, packmanifest.FileName))
	if err != nil {
		t.Fatal(err)
	}
	m, err := packmanifest.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return Verify(dir, raw, m, keys, require)
}

// details returns the refusal's details, failing unless err is
// CodeSignatureInvalid.
func details(t *testing.T, err error) Details {
	t.Helper()
	var we *wop.Error
	if !asWop(err, &we) || we.Code != CodeSignatureInvalid {
		t.Fatalf("error %v, want %s", err, CodeSignatureInvalid)
	}
	var d Details
	dec := json.NewDecoder(bytes.NewReader(we.Details))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

func asWop(err error, target **wop.Error) bool {
	we, ok := err.(*wop.Error)
	*target = we
	return ok
}

func acmeKeys() []Key {
	return []Key{
		{ID: "acme-2026", Public: seededKey(1).Public().(ed25519.PublicKey), Namespaces: []string{"vendor.acme.*"}},
		{ID: "other", Public: seededKey(2).Public().(ed25519.PublicKey), Namespaces: []string{"vendor.other.tools"}},
	}
}

func TestVerifySignedPack(t *testing.T) {
	dir := signedPack(t, manifestJSON("vendor.acme.tools", "acme-2026", digest), "acme-2026", seededKey(1))
	v, err := verify(t, dir, acmeKeys(), true)
	if err != nil {
		t.Fatal(err)
	}
	if *v != (Verified{KeyID: "acme-2026", EntrySHA256: digest}) {
		t.Errorf("Verified = %+v", v)
	}
	if Reason(err) != "" {
		t.Errorf("Reason(nil) = %q", Reason(err))
	}
}

// An unsigned pack is fine unless the policy requires a signature.
func TestVerifyUnsigned(t *testing.T) {
	dir := signedPack(t, manifestJSON("vendor.acme.tools", "", digest), "", nil)
	if v, err := verify(t, dir, acmeKeys(), false); v != nil || err != nil {
		t.Fatalf("not required: %+v, %v", v, err)
	}
	_, err := verify(t, dir, acmeKeys(), true)
	if d := details(t, err); !equalDetails(d, Details{Reason: ReasonUnsigned, Pack: "vendor.acme.tools"}) {
		t.Errorf("details %+v", d)
	}
	if !strings.Contains(err.Error(), "require_signature") {
		t.Errorf("%v does not name the policy", err)
	}
}

// Each way a signature fails is refused, whatever the policy, with its
// reason.
func TestVerifyRefusals(t *testing.T) {
	good := manifestJSON("vendor.acme.tools", "acme-2026", digest)
	tests := []struct {
		name  string
		setup func(t *testing.T) string
		want  Details
		msg   string
	}{
		{"one byte of pack.json flipped", func(t *testing.T) string {
			dir := signedPack(t, good, "acme-2026", seededKey(1))
			flipped := bytes.Replace(good, []byte(`"1.0.0"`), []byte(`"1.0.1"`), 1)
			if err := os.WriteFile(filepath.Join(dir, packmanifest.FileName), flipped, 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}, Details{Reason: ReasonBadSignature, Pack: "vendor.acme.tools", KeyID: "acme-2026"}, "changed since the pack was signed"},
		{"signed by another key under the trusted id", func(t *testing.T) string {
			return signedPack(t, good, "acme-2026", seededKey(9))
		}, Details{Reason: ReasonBadSignature, Pack: "vendor.acme.tools", KeyID: "acme-2026"}, "not key \"acme-2026\"'s"},
		{"key id nobody trusts", func(t *testing.T) string {
			return signedPack(t, manifestJSON("vendor.acme.tools", "stranger", digest), "stranger", seededKey(1))
		}, Details{Reason: ReasonKeyUnknown, Pack: "vendor.acme.tools", KeyID: "stranger"}, `no trusted_key "stranger" block`},
		{"key whose namespaces exclude the pack", func(t *testing.T) string {
			return signedPack(t, manifestJSON("vendor.acme.tools", "other", digest), "other", seededKey(2))
		}, Details{Reason: ReasonNamespaceNotPermitted, Pack: "vendor.acme.tools", KeyID: "other", Namespaces: nil}, "may sign packs named vendor.other.tools, not vendor.acme.tools"},
		{"signed without the entry digest", func(t *testing.T) string {
			return signedPack(t, manifestJSON("vendor.acme.tools", "acme-2026", ""), "acme-2026", seededKey(1))
		}, Details{Reason: ReasonEntryDigestMissing, Pack: "vendor.acme.tools", KeyID: "acme-2026"}, packmanifest.EntrySHA256Key},
		{"signing block without a signature file", func(t *testing.T) string {
			return signedPack(t, good, "", nil)
		}, Details{Reason: ReasonSignatureMissing, Pack: "vendor.acme.tools", KeyID: "acme-2026"}, "pack.sig.json is missing"},
		{"signature file without a signing block", func(t *testing.T) string {
			return signedPack(t, manifestJSON("vendor.acme.tools", "", digest), "acme-2026", seededKey(1))
		}, Details{Reason: ReasonSignatureFileInvalid, Pack: "vendor.acme.tools"}, "no signing block"},
		{"signature file by another key id", func(t *testing.T) string {
			dir := signedPack(t, good, "acme-2026", seededKey(1))
			sig, _ := Sign(seededKey(1), "acme-2027", good)
			if err := os.WriteFile(filepath.Join(dir, FileName), sig.Marshal(), 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}, Details{Reason: ReasonSignatureFileInvalid, Pack: "vendor.acme.tools", KeyID: "acme-2026"}, `is by key "acme-2027"`},
		{"signature file not JSON", func(t *testing.T) string {
			dir := signedPack(t, good, "acme-2026", seededKey(1))
			if err := os.WriteFile(filepath.Join(dir, FileName), []byte("sig"), 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}, Details{Reason: ReasonSignatureFileInvalid, Pack: "vendor.acme.tools", KeyID: "acme-2026"}, "pack.sig.json is not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.setup(t)
			for _, require := range []bool{false, true} {
				v, err := verify(t, dir, acmeKeys(), require)
				if err == nil {
					t.Fatalf("require %v: verified %+v", require, v)
				}
				d := details(t, err)
				if tt.want.Reason == ReasonNamespaceNotPermitted {
					tt.want.Namespaces = []string{"vendor.other.tools"}
				}
				if !equalDetails(d, tt.want) {
					t.Errorf("details %+v, want %+v", d, tt.want)
				}
				if !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("message %q does not say %q", err, tt.msg)
				}
				if Reason(err) != tt.want.Reason {
					t.Errorf("Reason = %q", Reason(err))
				}
			}
		})
	}
}

func equalDetails(a, b Details) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// The signature covers the canonical JSON, so reformatting pack.json
// (indentation, key order) keeps it valid; any change of a value does not.
func TestVerifySurvivesReformatting(t *testing.T) {
	good := manifestJSON("vendor.acme.tools", "acme-2026", digest)
	dir := signedPack(t, good, "acme-2026", seededKey(1))
	var doc map[string]any
	if err := json.Unmarshal(good, &doc); err != nil {
		t.Fatal(err)
	}
	compact, _ := json.Marshal(doc)
	if err := os.WriteFile(filepath.Join(dir, packmanifest.FileName), compact, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := verify(t, dir, acmeKeys(), true); err != nil {
		t.Fatal(err)
	}
}

func TestDigestMismatch(t *testing.T) {
	err := DigestMismatch("vendor.acme.tools", "acme-2026", "/p/bin/pack", digest, strings.Repeat("0", 64))
	want := Details{Reason: ReasonEntryDigestMismatch, Pack: "vendor.acme.tools", KeyID: "acme-2026", Expected: digest, Actual: strings.Repeat("0", 64)}
	if d := details(t, err); !equalDetails(d, want) {
		t.Errorf("details %+v", d)
	}
}

func TestPermits(t *testing.T) {
	k := Key{Namespaces: []string{"vendor.acme.*", "community.wophost.kvdemo"}}
	for name, want := range map[string]bool{
		"vendor.acme.tools": true, "vendor.acme.tools.extra": true, "vendor.acme": false, "vendor.acmex.tools": false,
		"community.wophost.kvdemo": true, "community.wophost.kvdemo2": false, "community.wophost.kvdemo.x": false,
	} {
		if got := k.Permits(name); got != want {
			t.Errorf("Permits(%q) = %v", name, got)
		}
	}
	for ns, ok := range map[string]bool{
		"vendor.acme.*": true, "vendor.*": true, "community.wophost.kvdemo": true,
		"*": false, "vendor": false, "acme.*": false, "vendor.acme*": false, "vendor.*.tools": false, "vendor.acme.": false,
	} {
		if got := CheckNamespace(ns) == ""; got != ok {
			t.Errorf("CheckNamespace(%q) accepts %v, want %v", ns, got, ok)
		}
	}
}

func TestKeyFilesRoundTrip(t *testing.T) {
	key := seededKey(3)
	id, got, err := ParsePrivateKey(MarshalPrivateKey("acme-2026", key))
	if err != nil || id != "acme-2026" || !got.Equal(key) {
		t.Fatalf("private key: %q %v", id, err)
	}
	id, pub, err := ParsePublicKeyFile(MarshalPublicKey("acme-2026", key.Public().(ed25519.PublicKey)))
	if err != nil || id != "acme-2026" || !pub.Equal(key.Public()) {
		t.Fatalf("public key: %q %v", id, err)
	}
	for _, bad := range []string{
		`{"keyId":"a","scheme":"ed25519-canonical-json","privateKey":"AAAA"}`,
		`{"keyId":"a","scheme":"rsa","privateKey":"` + strings.Repeat("A", 43) + `="}`,
		`{"keyId":"a b","scheme":"ed25519-canonical-json","privateKey":"` + strings.Repeat("A", 43) + `="}`,
		`{"keyId":"a","scheme":"ed25519-canonical-json","privateKey":"` + strings.Repeat("A", 43) + `=","extra":1}`,
	} {
		if _, _, err := ParsePrivateKey([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func TestValidKeyID(t *testing.T) {
	for id, want := range map[string]bool{
		"acme-2026":              true,
		"a._~-Z9":                true,
		strings.Repeat("k", 128): true,
		strings.Repeat("k", 129): false,
		"":                       false,
		"a b":                    false,
		"a/b":                    false,
	} {
		if got := ValidKeyID(id); got != want {
			t.Errorf("ValidKeyID(%q) = %v, want %v", id, got, want)
		}
	}
}
