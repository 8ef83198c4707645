package packsign

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wophost/wophost/core/packmanifest"
)

// packFiles are the files of the pack fullPack lays out, beside pack.json.
var packFiles = map[string]string{
	"bin/pack":                     "\x7fELF a binary",
	"schemas/remember.input.json":  `{"type":"object","required":["key"]}`,
	"schemas/recall.input.json":    `{"type":"object"}`,
	"prompts/describe.md":          "Describe the value.",
	"schemas/deeper/shared.json":   `{"type":"string"}`,
	"schemas/remember.output.json": `{"type":"object"}`,
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// fullPack lays out packFiles, signs the pack as `host packs sign` does
// (the file digest map from Digests) with acme-2026's key, and returns
// its directory.
func fullPack(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range packFiles {
		write(t, dir, name, content)
	}
	files, err := Digests(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(packFiles) {
		t.Fatalf("Digests = %v, want the %d files", files, len(packFiles))
	}
	for name, content := range packFiles {
		if files[name] != sum(content) {
			t.Fatalf("Digests[%s] = %q, want %q", name, files[name], sum(content))
		}
	}
	raw := manifestWith("vendor.acme.tools", "acme-2026", sum(packFiles["bin/pack"]), files)
	write(t, dir, packmanifest.FileName, string(raw))
	sig, err := Sign(seededKey(1), "acme-2026", raw)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, FileName, string(sig.Marshal()))
	return dir
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyCoversEveryFile(t *testing.T) {
	dir := fullPack(t)
	if _, err := verify(t, dir, acmeKeys(), true); err != nil {
		t.Fatalf("the pack as signed: %v", err)
	}
	// Digests leaves out pack.json and the signature file, and reading
	// the pack does not change what it gives.
	files, err := Digests(dir)
	if err != nil || len(files) != len(packFiles) {
		t.Fatalf("Digests after signing: %v, %v", files, err)
	}
}

// Each way a signed pack's files differ from what was signed is refused,
// whatever the policy, naming the file.
func TestVerifyRefusesChangedFiles(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.json")
	if err := os.WriteFile(outside, []byte(`{"type":"object"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(t *testing.T, dir string)
		want   Details
		msg    string
	}{
		{"a schema replaced", func(t *testing.T, dir string) {
			write(t, dir, "schemas/remember.input.json", `{"type":"object"}`)
		}, Details{Reason: ReasonFileDigestMismatch, File: "schemas/remember.input.json",
			Expected: sum(packFiles["schemas/remember.input.json"]), Actual: sum(`{"type":"object"}`)},
			"schemas/remember.input.json changed since signing: its sha256 is " + sum(`{"type":"object"}`)},
		{"one byte appended to a file in a subdirectory", func(t *testing.T, dir string) {
			write(t, dir, "schemas/deeper/shared.json", packFiles["schemas/deeper/shared.json"]+" ")
		}, Details{Reason: ReasonFileDigestMismatch, File: "schemas/deeper/shared.json",
			Expected: sum(packFiles["schemas/deeper/shared.json"]), Actual: sum(packFiles["schemas/deeper/shared.json"] + " ")},
			"schemas/deeper/shared.json changed since signing"},
		{"a file added", func(t *testing.T, dir string) {
			write(t, dir, "schemas/remember.input.json.orig", "{}")
		}, Details{Reason: ReasonFileNotSigned, File: "schemas/remember.input.json.orig"},
			"schemas/remember.input.json.orig was not signed (added since)"},
		{"an empty file added at the root", func(t *testing.T, dir string) {
			write(t, dir, ".hidden", "")
		}, Details{Reason: ReasonFileNotSigned, File: ".hidden"}, ".hidden was not signed"},
		{"a file removed", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "prompts", "describe.md")); err != nil {
				t.Fatal(err)
			}
		}, Details{Reason: ReasonFileMissing, File: "prompts/describe.md"}, "prompts/describe.md, signed, is missing"},
		{"a file moved", func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, "prompts"), filepath.Join(dir, "prompt")); err != nil {
				t.Fatal(err)
			}
		}, Details{Reason: ReasonFileNotSigned, File: "prompt/describe.md"}, "(and 1 other files are not as signed)"},
		{"a file replaced by a link to a signed file", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "schemas", "recall.input.json")
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("remember.input.json", path); err != nil {
				t.Fatal(err)
			}
		}, Details{Reason: ReasonFileNotRegular, File: "schemas/recall.input.json"},
			"schemas/recall.input.json is a symbolic link; a signed pack holds regular files and directories only"},
		{"a file replaced by a link outside the pack", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "schemas", "remember.input.json")
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, path); err != nil {
				t.Fatal(err)
			}
		}, Details{Reason: ReasonFileNotRegular, File: "schemas/remember.input.json"}, "is a symbolic link"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := fullPack(t)
			tt.change(t, dir)
			for _, require := range []bool{false, true} {
				v, err := verify(t, dir, acmeKeys(), require)
				if err == nil {
					t.Fatalf("require %v: verified %+v", require, v)
				}
				tt.want.Pack, tt.want.KeyID = "vendor.acme.tools", "acme-2026"
				if d := details(t, err); !equalDetails(d, tt.want) {
					t.Errorf("details %+v, want %+v", d, tt.want)
				}
				if !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), "the pack vendor.acme.tools is not as signed: ") {
					t.Errorf("message %q does not say %q", err, tt.msg)
				}
			}
		})
	}
}

// A directory turned into a link is refused as a link, before any file
// is compared.
func TestVerifyRefusesALinkedDirectory(t *testing.T) {
	dir := fullPack(t)
	if err := os.Rename(filepath.Join(dir, "schemas"), filepath.Join(dir, "zz")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("zz", filepath.Join(dir, "schemas")); err != nil {
		t.Fatal(err)
	}
	_, err := verify(t, dir, acmeKeys(), false)
	want := Details{Reason: ReasonFileNotRegular, Pack: "vendor.acme.tools", KeyID: "acme-2026", File: "schemas"}
	if d := details(t, err); !equalDetails(d, want) {
		t.Errorf("details %+v, want %+v", d, want)
	}
}

// The signature file is opened inside the pack and never through a link,
// whether the link leads outside the pack or to a copy inside it.
func TestVerifyRefusesALinkedSignatureFile(t *testing.T) {
	for _, inside := range []bool{false, true} {
		dir := fullPack(t)
		sigPath := filepath.Join(dir, FileName)
		sig, err := os.ReadFile(sigPath)
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(t.TempDir(), "pack.sig.json")
		if inside {
			target = filepath.Join(dir, "bin", "copy.sig.json")
		}
		if err := os.WriteFile(target, sig, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(sigPath); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, sigPath); err != nil {
			t.Fatal(err)
		}
		_, err = verify(t, dir, acmeKeys(), true)
		want := Details{Reason: ReasonSignatureFileInvalid, Pack: "vendor.acme.tools"}
		if d := details(t, err); !equalDetails(d, want) {
			t.Errorf("inside %v: details %+v, want %+v", inside, d, want)
		}
		if !strings.Contains(err.Error(), sigPath+" is a symbolic link; it must be a regular file in the pack") {
			t.Errorf("inside %v: %v", inside, err)
		}
	}
}

// A signature made before signatures covered every file (pack.json and
// the binary only) does not verify as covering the pack: it is refused,
// saying to sign again.
func TestVerifyRefusesTheOldFormat(t *testing.T) {
	dir := signedPack(t, manifestWith("vendor.acme.tools", "acme-2026", digest, nil), "acme-2026", seededKey(1))
	_, err := verify(t, dir, acmeKeys(), false)
	want := Details{Reason: ReasonFilesDigestMissing, Pack: "vendor.acme.tools", KeyID: "acme-2026"}
	if d := details(t, err); !equalDetails(d, want) {
		t.Errorf("details %+v, want %+v", d, want)
	}
	if !strings.Contains(err.Error(), "has no x-wophost-files") || !strings.Contains(err.Error(), "sign the pack again with `host packs sign`") {
		t.Errorf("message: %v", err)
	}
}

// Digests refuses what Verify refuses: a link, and more than MaxFiles
// files.
func TestDigestsRefusals(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a", "x")
	if err := os.Symlink("a", filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := Digests(dir); err == nil || !strings.Contains(err.Error(), "b is a symbolic link") {
		t.Errorf("a link: %v", err)
	}

	dir = t.TempDir()
	for i := range MaxFiles {
		write(t, dir, filepath.Join("d", strings.Repeat("f", 1+i/200)+string(rune('a'+i%26))+string(rune('a'+i/26%26))), "")
	}
	// The pack's own files are not counted.
	write(t, dir, packmanifest.FileName, "{}")
	write(t, dir, FileName, "{}")
	if files, err := Digests(dir); err != nil || len(files) != MaxFiles {
		t.Fatalf("%d files: %d, %v", MaxFiles, len(files), err)
	}
	write(t, dir, "one-more", "")
	if _, err := Digests(dir); err == nil || !strings.Contains(err.Error(), "more than 4096 files") {
		t.Errorf("%d files: %v", MaxFiles+1, err)
	}
}

// A changed entry binary is an entry_digest_mismatch, as when the host
// checks the opened binary, naming the file.
func TestVerifyRefusesAChangedBinary(t *testing.T) {
	dir := fullPack(t)
	write(t, dir, "bin/pack", "\x7fELF another binary")
	_, err := verify(t, dir, acmeKeys(), false)
	want := Details{Reason: ReasonEntryDigestMismatch, Pack: "vendor.acme.tools", KeyID: "acme-2026", File: "bin/pack",
		Expected: sum(packFiles["bin/pack"]), Actual: sum("\x7fELF another binary")}
	if d := details(t, err); !equalDetails(d, want) {
		t.Errorf("details %+v, want %+v", d, want)
	}
	if !strings.Contains(err.Error(), "the binary bin/pack is not the one signed: its sha256 is "+sum("\x7fELF another binary")) {
		t.Errorf("message: %v", err)
	}
}

// The signature covers the whole pack tree (Digests hashes every file),
// so a schema file that another schema only references is covered as
// surely as one pack.json names: changing it after signing fails the
// verification, naming it, and the file changed after a verification is
// refused by LoadSchemas on the bytes it compiles.
func TestVerifyCoversReferencedSchemas(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"bin/pack":                 "\x7fELF a binary",
		"schemas/input.json":       `{"type":"object","properties":{"key":{"$ref":"defs/common.json#/$defs/key"}}}`,
		"schemas/defs/common.json": `{"$defs":{"key":{"type":"string","minLength":1}}}`,
	}
	for name, content := range files {
		write(t, dir, name, content)
	}
	digests, err := Digests(dir)
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]any{
		"name": "vendor.acme.tools", "version": "1.0.0", "kind": "node",
		"engines": map[string]any{"openwop": ">=2.0 <3.0.0"},
		"runtime": map[string]any{"language": "go", "entry": "bin/pack"},
		"nodes": []any{map[string]any{"typeId": "demo.echo", "version": "1.0.0", "category": "data", "role": "pure",
			"inputSchemaRef": "schemas/input.json"}},
		"signing":                   map[string]any{"keyId": "acme-2026", "scheme": Scheme},
		packmanifest.EntrySHA256Key: sum(files["bin/pack"]),
		packmanifest.FilesKey:       digests,
	}
	raw, _ := json.MarshalIndent(doc, "", "  ")
	write(t, dir, packmanifest.FileName, string(raw))
	sig, err := Sign(seededKey(1), "acme-2026", raw)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, FileName, string(sig.Marshal()))
	load := func() (*packmanifest.Manifest, error) {
		m, err := packmanifest.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return m, m.LoadSchemas(dir)
	}
	if _, err := verify(t, dir, acmeKeys(), true); err != nil {
		t.Fatalf("the pack as signed: %v", err)
	}
	if _, err := load(); err != nil {
		t.Fatalf("the schemas as signed: %v", err)
	}

	loosened := `{"$defs":{"key":{}}}`
	write(t, dir, "schemas/defs/common.json", loosened)
	_, err = verify(t, dir, acmeKeys(), false)
	if d := details(t, err); d.Reason != ReasonFileDigestMismatch || d.File != "schemas/defs/common.json" || d.Actual != sum(loosened) {
		t.Errorf("a referenced schema changed: %+v, want file_digest_mismatch naming schemas/defs/common.json", d)
	}
	if _, err := load(); err == nil || !strings.Contains(err.Error(), "schemas/defs/common.json: (document): is not the file "+packmanifest.FilesKey+" lists") {
		t.Errorf("LoadSchemas of the changed file: %v", err)
	}
}
