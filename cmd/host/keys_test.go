package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wophost/wophost/core/packsign"
)

// runHost runs the host's command line in this process.
func runHost(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = execute(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// generateKey writes the key pair id into dir with `host keys generate`.
func generateKey(t *testing.T, dir, id string) (private, public string) {
	t.Helper()
	if code, out, errOut := runHost(t, "keys", "generate", id, "--dir", dir); code != 0 {
		t.Fatalf("keys generate: exit %d\n%s%s", code, out, errOut)
	}
	return filepath.Join(dir, id+".key.json"), filepath.Join(dir, id+".pub.json")
}

// `host keys sign` writes FILE.sig, and `host keys verify-file` accepts
// it with the public key file or the key itself, and refuses, with exit
// status 1 and the reason, a changed byte of the file, another key, and
// a public key file of another id.
func TestKeysSignAndVerifyFile(t *testing.T) {
	dir := t.TempDir()
	priv, pub := generateKey(t, dir, "release-1")
	_, otherPub := generateKey(t, dir, "release-2")
	file := filepath.Join(dir, "SHA256SUMS")
	if err := os.WriteFile(file, []byte("abc  wophost_v1.0.0_linux_amd64.tar.gz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runHost(t, "keys", "sign", "--key", priv, file)
	if code != 0 || !strings.Contains(out, "wrote "+file+".sig") {
		t.Fatalf("keys sign: exit %d\n%s%s", code, out, errOut)
	}
	sigData, err := os.ReadFile(file + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := packsign.ParseFileSignature(sigData); err != nil {
		t.Fatalf("the signature file: %v\n%s", err, sigData)
	}
	var pubFile packsign.PublicKeyFile
	data, _ := os.ReadFile(pub)
	if err := json.Unmarshal(data, &pubFile); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "public key "+pubFile.PublicKey) {
		t.Errorf("keys sign does not print the public key %s:\n%s", pubFile.PublicKey, out)
	}

	verify := func(want int, wantOut string, args ...string) {
		t.Helper()
		code, out, errOut := runHost(t, append([]string{"keys", "verify-file"}, args...)...)
		if code != want || !strings.Contains(out+errOut, wantOut) {
			t.Errorf("verify-file %v: exit %d, want %d with %q\n%s%s", args, code, want, wantOut, out, errOut)
		}
	}
	verify(0, "verified: signed by key release-1", "--key", pub, file)
	verify(0, "verified: signed by key release-1", "--public-key", pubFile.PublicKey, file)
	verify(1, `not by the key "release-2"`, "--key", otherPub, file)

	sums, _ := os.ReadFile(file)
	sums[0] ^= 1
	if err := os.WriteFile(file, sums, 0o644); err != nil {
		t.Fatal(err)
	}
	verify(1, "not verified", "--key", pub, file)
	verify(1, "not verified", "--public-key", pubFile.PublicKey, file)
}

// Near misses of the command lines: no key, both keys, a key that is no
// key, a missing or foreign signature file, a private key others may
// read. Each is refused with a message naming what is wrong, and no
// signature file is written by a refused sign.
func TestKeysFileSigningRefusals(t *testing.T) {
	dir := t.TempDir()
	priv, pub := generateKey(t, dir, "release-1")
	file := filepath.Join(dir, "SHA256SUMS")
	if err := os.WriteFile(file, []byte("abc  x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(dir, "loose.key.json")
	data, _ := os.ReadFile(priv)
	if err := os.WriteFile(loose, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	// A public key file where the private one belongs, private itself.
	pubAsPrivate := filepath.Join(dir, "public.key.json")
	data, _ = os.ReadFile(pub)
	if err := os.WriteFile(pubAsPrivate, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// A pack's signature file where the file's belongs.
	packSig := filepath.Join(dir, "pack.sig.json")
	_, key, err := packsign.ParsePrivateKey(mustRead(t, priv))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := packsign.Sign(key, "release-1", []byte(`{"name":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(packSig, ps.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"sign", file}, 2, "needs --key"},
		{[]string{"sign", "--key", loose, file}, 1, "chmod 600"},
		{[]string{"sign", "--key", pubAsPrivate, file}, 1, `unknown field "publicKey"`},
		{[]string{"verify-file", file}, 2, "exactly one of --key"},
		{[]string{"verify-file", "--key", pub, "--public-key", "x", file}, 2, "exactly one of --key"},
		{[]string{"verify-file", "--public-key", "bm90IGEga2V5", file}, 2, "--public-key"},
		{[]string{"verify-file", "--key", priv, file}, 1, `unknown field "privateKey"`},
		{[]string{"verify-file", "--key", pub, file}, 1, "SHA256SUMS.sig"},
		{[]string{"verify-file", "--key", pub, "--signature", packSig, file}, 1, `scheme "` + packsign.Scheme + `"`},
	} {
		code, out, errOut := runHost(t, append([]string{"keys"}, c.args...)...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("keys %v: exit %d, want %d with %q\n%s%s", c.args, code, c.code, c.want, out, errOut)
		}
	}
	if _, err := os.Stat(file + ".sig"); !os.IsNotExist(err) {
		t.Errorf("a refused sign left %s.sig: %v", file, err)
	}
}

// A file of the largest size is signed; one byte more is refused, not
// read whole into memory.
func TestKeysSignBound(t *testing.T) {
	dir := t.TempDir()
	priv, _ := generateKey(t, dir, "release-1")
	for _, c := range []struct {
		size int64
		code int
	}{{maxSignedFileSize, 0}, {maxSignedFileSize + 1, 1}} {
		file := filepath.Join(dir, "big")
		f, err := os.Create(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(c.size); err != nil {
			t.Fatal(err)
		}
		f.Close()
		code, out, errOut := runHost(t, "keys", "sign", "--key", priv, file)
		if code != c.code || (c.code == 1 && !strings.Contains(errOut, "larger than 16 MiB")) {
			t.Errorf("a file of %d bytes: exit %d, want %d\n%s%s", c.size, code, c.code, out, errOut)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
