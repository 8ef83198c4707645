package packsign

import (
	"crypto/ed25519"
	"strings"
	"testing"
)

// A file signature verifies over the bytes signed with the key that
// signed them, and over nothing else: a changed byte of the file or of the
// signature, another key, or a key id other than the one trusted fails.
func TestFileSignature(t *testing.T) {
	key, other := seededKey(1), seededKey(2)
	pub := key.Public().(ed25519.PublicKey)
	data := []byte("9f86d081  wophost_v1.0.0_linux_amd64.tar.gz\n")
	sig, err := SignFile(key, "release-1", data)
	if err != nil {
		t.Fatal(err)
	}
	if sig.Scheme != FileScheme || sig.KeyID != "release-1" || len(sig.Value) != ed25519.SignatureSize {
		t.Fatalf("signature %+v", sig)
	}
	if err := VerifyFile(pub, "release-1", data, sig); err != nil {
		t.Fatalf("the signed bytes: %v", err)
	}
	if err := VerifyFile(pub, "", data, sig); err != nil {
		t.Fatalf("the signed bytes, no key id trusted: %v", err)
	}
	changed := append([]byte(nil), data...)
	changed[0] ^= 1
	if err := VerifyFile(pub, "release-1", changed, sig); err == nil {
		t.Error("a file with one byte changed verified")
	}
	bad := *sig
	bad.Value = append([]byte(nil), sig.Value...)
	bad.Value[10] ^= 1
	if err := VerifyFile(pub, "release-1", data, &bad); err == nil {
		t.Error("a signature with one byte changed verified")
	}
	if err := VerifyFile(other.Public().(ed25519.PublicKey), "release-1", data, sig); err == nil {
		t.Error("another key's public key verified the signature")
	}
	if err := VerifyFile(pub, "release-2", data, sig); err == nil || !strings.Contains(err.Error(), `"release-1"`) || !strings.Contains(err.Error(), `"release-2"`) {
		t.Errorf("a signature naming another key id: %v, want an error naming both ids", err)
	}
	if _, err := SignFile(key, "not a key id", data); err == nil {
		t.Error("signed under an invalid key id")
	}
}

// One key signs packs and files, and neither signature passes for the
// other: a file signature is Ed25519ctx, a pack signature pure Ed25519.
func TestFileSignatureIsNotAPackSignature(t *testing.T) {
	key := seededKey(3)
	pub := key.Public().(ed25519.PublicKey)
	manifest := manifestJSON("community.acme.tools", "k", digest)
	canonical, err := Canonical(manifest)
	if err != nil {
		t.Fatal(err)
	}
	packSig, err := Sign(key, "k", manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyFile(pub, "k", canonical, &FileSignature{Scheme: FileScheme, KeyID: "k", Value: packSig.Value}); err == nil {
		t.Error("a pack signature verified as a file signature over the same bytes")
	}
	fileSig, err := SignFile(key, "k", canonical)
	if err != nil {
		t.Fatal(err)
	}
	if ed25519.Verify(pub, canonical, fileSig.Value) {
		t.Error("a file signature verified as a pack signature over the same bytes")
	}
}

// The signature file reads back as written, and every near miss is
// refused with the field it is about.
func TestParseFileSignature(t *testing.T) {
	sig, err := SignFile(seededKey(4), "release-1", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseFileSignature(sig.Marshal())
	if err != nil {
		t.Fatalf("the marshalled signature: %v", err)
	}
	if back.Scheme != sig.Scheme || back.KeyID != sig.KeyID || string(back.Value) != string(sig.Value) {
		t.Errorf("read back %+v, wrote %+v", back, sig)
	}
	good := string(sig.Marshal())
	value := good[strings.Index(good, `"signature": "`)+len(`"signature": "`):]
	value = value[:strings.Index(value, `"`)]
	for _, c := range []struct{ name, text, want string }{
		{"pack scheme", strings.Replace(good, FileScheme, Scheme, 1), "scheme"},
		{"short signature", strings.Replace(good, value, value[4:], 1), "signature"},
		{"bad key id", strings.Replace(good, `"release-1"`, `"release 1"`, 1), "keyId"},
		{"unknown field", strings.Replace(good, `"scheme"`, `"extra": 1, "scheme"`, 1), "extra"},
		{"missing field", `{"scheme": "` + FileScheme + `", "keyId": "k"}`, "signature"},
		{"repeated key", strings.Replace(good, `"scheme"`, `"keyId": "other", "scheme"`, 1), "repeated"},
		{"trailing data", good + "{}", "after"},
	} {
		if _, err := ParseFileSignature([]byte(c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
}
