// Package packsign signs and verifies node packs by OpenWOP's one signing
// scheme, ed25519-canonical-json: a detached Ed25519 signature over the
// canonical JSON (RFC 8785) of pack.json, whose signing block names the
// key, kept next to it in pack.sig.json.
//
// A wophost pack is also a binary and the files the host reads beside
// pack.json, so a signed pack.json carries the SHA-256 of its entry binary
// under packmanifest.EntrySHA256Key and of every file of the pack under
// packmanifest.FilesKey: the signature covers them through it. Verify
// digests every file under the pack's root, through the root, and refuses
// a changed, missing or added one, or a symbolic link; the host checks the
// entry's digest again on the opened binary before it starts the process,
// and a schema's on the bytes it compiles.
//
// Verify applies an operator's trust: the keys it trusts, each for the
// pack names it may sign (permitted namespaces), and whether a pack must
// be signed. Every refusal is a *wop.Error of CodeSignatureInvalid whose
// details say what failed (Details.Reason).
//
// The same keys sign whole files too (SignFile, FileScheme), such as a
// release's SHA256SUMS, under a scheme of their own.
package packsign

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/internal/canonjson"
	"github.com/wophost/wophost/sdk/wop"
)

// Scheme is OpenWOP's one signing scheme.
const Scheme = "ed25519-canonical-json"

// FileName is the detached signature file, next to pack.json.
const FileName = "pack.sig.json"

// MaxFileSize bounds the signature file and the key files, in bytes: each
// holds a few short strings.
const MaxFileSize = 4096

// CodeSignatureInvalid is OpenWOP's code for a pack whose signature does
// not verify, or that a policy requires to be signed and is not.
const CodeSignatureInvalid = "pack_signature_invalid"

// Reasons, the details.reason of a CodeSignatureInvalid refusal: what
// failed.
const (
	// ReasonUnsigned: the policy requires a signature and the pack has
	// none (no signing block, no signature file).
	ReasonUnsigned = "unsigned"
	// ReasonSignatureMissing: pack.json names a signing key but the
	// signature file is missing.
	ReasonSignatureMissing = "signature_missing"
	// ReasonSignatureFileInvalid: the signature file is not one, or does
	// not agree with pack.json's signing block.
	ReasonSignatureFileInvalid = "signature_file_invalid"
	// ReasonKeyUnknown: the operator trusts no key of that id.
	ReasonKeyUnknown = "key_unknown"
	// ReasonBadSignature: the signature is not the key's over pack.json's
	// canonical JSON; pack.json (or the signature) changed since signing.
	ReasonBadSignature = "bad_signature"
	// ReasonNamespaceNotPermitted: the key is not trusted to sign packs
	// of this name.
	ReasonNamespaceNotPermitted = "namespace_not_permitted"
	// ReasonEntryDigestMissing: a signed pack.json without the entry
	// binary's digest, which would leave the binary unsigned.
	ReasonEntryDigestMissing = "entry_digest_missing"
	// ReasonEntryDigestMismatch: the entry binary is not the one whose
	// digest was signed.
	ReasonEntryDigestMismatch = "entry_digest_mismatch"
	// ReasonFilesDigestMissing: a signed pack.json without the digests of
	// the pack's files, a signature made before signatures covered every
	// file; the pack must be signed again.
	ReasonFilesDigestMissing = "files_digest_missing"
	// ReasonFileDigestMismatch: a file of the pack is not the one whose
	// digest was signed.
	ReasonFileDigestMismatch = "file_digest_mismatch"
	// ReasonFileMissing: a file whose digest was signed is not in the
	// pack.
	ReasonFileMissing = "file_missing"
	// ReasonFileNotSigned: the pack holds a file that was not signed,
	// added since.
	ReasonFileNotSigned = "file_not_signed"
	// ReasonFileNotRegular: the pack holds a symbolic link, or another
	// file that is neither a regular file nor a directory, or more files
	// than MaxFiles; a signed pack holds regular files only.
	ReasonFileNotRegular = "file_not_regular"
)

// MaxFiles bounds the files of a signed pack, so that checking one reads
// a bounded directory tree.
const MaxFiles = 4096

// Details are the details of a CodeSignatureInvalid refusal.
type Details struct {
	Reason string `json:"reason"`
	Pack   string `json:"pack,omitempty"`
	KeyID  string `json:"keyId,omitempty"`
	// Namespaces are the trusted key's permitted namespaces, for
	// ReasonNamespaceNotPermitted.
	Namespaces []string `json:"namespaces,omitempty"`
	// File is the pack file, relative and slash-separated, that a
	// file_* reason is about.
	File string `json:"file,omitempty"`
	// Expected and Actual are the signed and the actual digests, for
	// ReasonEntryDigestMismatch and ReasonFileDigestMismatch.
	Expected string `json:"expected,omitempty"`
	Actual   string `json:"actual,omitempty"`
}

// refusal is the CodeSignatureInvalid error with d as its details.
func refusal(d Details, format string, args ...any) *wop.Error {
	return wop.Errorf(CodeSignatureInvalid, format, args...).WithDetails(d)
}

// Reason returns the details.reason of a CodeSignatureInvalid error, ""
// for any other error.
func Reason(err error) string {
	var we *wop.Error
	if !errors.As(err, &we) || we.Code != CodeSignatureInvalid {
		return ""
	}
	var d Details
	_ = json.Unmarshal(we.Details, &d)
	return d.Reason
}

// Signature is the signature file: the scheme, the key id (as pack.json's
// signing block names them) and the 64-byte Ed25519 signature, base64.
type Signature struct {
	Scheme string `json:"scheme"`
	KeyID  string `json:"keyId"`
	// Value is the signature over the canonical JSON of pack.json.
	Value []byte `json:"signature"`
}

// keyIDPattern is OpenWOP's signing key id, 1 to maxKeyIDBytes of these
// characters; the length is checked apart, since a counted repetition
// compiles to one state per count, at start.
var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)

const maxKeyIDBytes = 128

// ValidKeyID reports whether id is a signing key id by OpenWOP's grammar.
func ValidKeyID(id string) bool { return len(id) <= maxKeyIDBytes && keyIDPattern.MatchString(id) }

// ParseSignature reads a signature file: one closed JSON object, no
// larger than MaxFileSize, with the scheme, a valid key id and a
// signature of exactly ed25519.SignatureSize bytes.
func ParseSignature(data []byte) (*Signature, error) {
	scheme, keyID, sig, err := parseSignatureObject(data)
	if err != nil {
		return nil, err
	}
	if scheme != Scheme {
		return nil, fmt.Errorf("scheme %q: the one scheme is %q", scheme, Scheme)
	}
	return &Signature{Scheme: scheme, KeyID: keyID, Value: sig}, nil
}

// parseSignatureObject reads the object a pack's and a file's signature
// both are: one closed JSON object, no larger than MaxFileSize, with a
// scheme, a valid key id and a signature of exactly
// ed25519.SignatureSize bytes. The caller checks the scheme.
func parseSignatureObject(data []byte) (scheme, keyID string, sig []byte, err error) {
	var raw struct {
		Scheme    *string `json:"scheme"`
		KeyID     *string `json:"keyId"`
		Signature *string `json:"signature"`
	}
	if err := decodeClosed(data, &raw); err != nil {
		return "", "", nil, err
	}
	switch {
	case raw.Scheme == nil || raw.KeyID == nil || raw.Signature == nil:
		return "", "", nil, errors.New(`needs "scheme", "keyId" and "signature"`)
	case !ValidKeyID(*raw.KeyID):
		return "", "", nil, fmt.Errorf("keyId %q: a key id is 1 to 128 letters, digits and ._~-", *raw.KeyID)
	}
	sig, err = base64.StdEncoding.Strict().DecodeString(*raw.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return "", "", nil, fmt.Errorf("signature: must be %d bytes in standard base64", ed25519.SignatureSize)
	}
	return *raw.Scheme, *raw.KeyID, sig, nil
}

// Marshal returns the signature file's bytes.
func (s *Signature) Marshal() []byte {
	b, _ := json.MarshalIndent(struct {
		Scheme    string `json:"scheme"`
		KeyID     string `json:"keyId"`
		Signature string `json:"signature"`
	}{s.Scheme, s.KeyID, base64.StdEncoding.EncodeToString(s.Value)}, "", "  ")
	return append(b, '\n')
}

// decodeClosed decodes one JSON object from data into v, refusing
// oversized input, unknown and repeated keys, and anything after it.
func decodeClosed(data []byte, v any) error {
	if len(data) > MaxFileSize {
		return fmt.Errorf("is larger than %d bytes", MaxFileSize)
	}
	// RFC 8785's parser refuses repeated keys, which encoding/json lets
	// through (the last wins).
	if _, err := canonjson.Transform(data); err != nil {
		return fmt.Errorf("is not a JSON object without repeated keys: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("is not valid: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("has data after its JSON object")
	}
	return nil
}

// Canonical returns the canonical JSON (RFC 8785) of a JSON document: the
// bytes a signature covers.
func Canonical(doc []byte) ([]byte, error) {
	if doc == nil {
		return nil, errors.New("no JSON document")
	}
	return canonjson.Transform(doc)
}

// Sign signs manifest, pack.json's bytes, with key, naming it keyID.
func Sign(key ed25519.PrivateKey, keyID string, manifest []byte) (*Signature, error) {
	if !ValidKeyID(keyID) {
		return nil, fmt.Errorf("key id %q: a key id is 1 to 128 letters, digits and ._~-", keyID)
	}
	c, err := Canonical(manifest)
	if err != nil {
		return nil, fmt.Errorf("pack.json has no canonical JSON: %w", err)
	}
	return &Signature{Scheme: Scheme, KeyID: keyID, Value: ed25519.Sign(key, c)}, nil
}

// Key is a key the operator trusts to sign packs of some names.
type Key struct {
	ID     string
	Public ed25519.PublicKey
	// Namespaces are the pack names the key may sign: a name, or a
	// prefix of dot-separated segments followed by ".*", which matches
	// every name below it ("vendor.acme.*": "vendor.acme.tools").
	Namespaces []string
}

// namespacePattern is a pack name or a name prefix followed by ".*"; a
// prefix starts with OpenWOP's scope, so no pattern permits every pack.
var namespacePattern = regexp.MustCompile(`^(core|vendor|community|private)(\.[a-z][a-zA-Z0-9_-]*)*(\.\*)?$`)

// CheckNamespace explains why pattern cannot be a permitted namespace, or
// returns "".
func CheckNamespace(pattern string) string {
	if !namespacePattern.MatchString(pattern) || !strings.Contains(pattern, ".") {
		return `must be a pack name such as "vendor.acme.tools", or a name prefix followed by ".*" such as "vendor.acme.*"`
	}
	return ""
}

// Permits reports whether k may sign the pack named name.
func (k Key) Permits(name string) bool {
	for _, ns := range k.Namespaces {
		if prefix, ok := strings.CutSuffix(ns, "*"); ok {
			if strings.HasPrefix(name, prefix) && len(name) > len(prefix) {
				return true
			}
		} else if name == ns {
			return true
		}
	}
	return false
}

// ParsePublicKey reads a public key as written in a key file and in the
// config: the 32-byte Ed25519 public key in standard base64.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("an Ed25519 public key is %d bytes in standard base64 (44 characters)", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// EncodePublicKey writes pub as ParsePublicKey reads it.
func EncodePublicKey(pub ed25519.PublicKey) string {
	return base64.StdEncoding.EncodeToString(pub)
}

// Verified is what a verification established of a signed pack.
type Verified struct {
	KeyID string
	// EntrySHA256 is the signed digest of the entry binary, which the
	// host checks on the opened binary before starting it.
	EntrySHA256 string
}

// Verify checks the signature of the pack in dir, whose pack.json read as
// raw parses as m, against keys. It returns nil, nil for an unsigned pack
// when require is false. A signed pack (a signing block, or a signature
// file) is always verified, whatever require says: a signature that does
// not verify is a pack altered since it was signed. A signed pack's
// files must be the ones pack.json lists (packmanifest.FilesKey), none
// changed, missing or added, and none a symbolic link; the signature file
// and every file are read through an os.Root of dir. Refusals are
// CodeSignatureInvalid with Details, naming the file (Details.File) when
// one is at fault.
func Verify(dir string, raw []byte, m *packmanifest.Manifest, keys []Key, require bool) (*Verified, error) {
	sigPath := filepath.Join(dir, FileName)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, refusal(Details{Reason: ReasonSignatureFileInvalid, Pack: m.Name}, "%s: %v", dir, err)
	}
	defer root.Close()
	sigData, err := readSmall(root, FileName)
	present := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, refusal(Details{Reason: ReasonSignatureFileInvalid, Pack: m.Name}, "%s %v", sigPath, err)
	}
	switch {
	case m.Signing == nil && !present:
		if require {
			return nil, refusal(Details{Reason: ReasonUnsigned, Pack: m.Name},
				"pack %s is not signed (no signing block in pack.json, no %s) and the policy requires a signature (require_signature)", m.Name, FileName)
		}
		return nil, nil
	case m.Signing == nil:
		return nil, refusal(Details{Reason: ReasonSignatureFileInvalid, Pack: m.Name},
			"%s is present but pack.json has no signing block naming the key; sign the pack again", sigPath)
	case !present:
		return nil, refusal(Details{Reason: ReasonSignatureMissing, Pack: m.Name, KeyID: m.Signing.KeyID},
			"pack.json names the signing key %q but %s is missing", m.Signing.KeyID, sigPath)
	}
	keyID := m.Signing.KeyID
	sig, err := ParseSignature(sigData)
	if err != nil {
		return nil, refusal(Details{Reason: ReasonSignatureFileInvalid, Pack: m.Name, KeyID: keyID}, "%s %v", sigPath, err)
	}
	if sig.KeyID != keyID || sig.Scheme != m.Signing.Scheme {
		return nil, refusal(Details{Reason: ReasonSignatureFileInvalid, Pack: m.Name, KeyID: keyID},
			"%s is by key %q (%s), pack.json's signing block names %q (%s)", sigPath, sig.KeyID, sig.Scheme, keyID, m.Signing.Scheme)
	}
	var key *Key
	for i := range keys {
		if keys[i].ID == keyID {
			key = &keys[i]
			break
		}
	}
	if key == nil {
		return nil, refusal(Details{Reason: ReasonKeyUnknown, Pack: m.Name, KeyID: keyID},
			"pack %s is signed with key %q, which this host does not trust (no trusted_key %q block)", m.Name, keyID, keyID)
	}
	c, err := Canonical(raw)
	if err != nil || !ed25519.Verify(key.Public, c, sig.Value) {
		why := "pack.json or the signature changed since the pack was signed"
		if err != nil {
			why = "pack.json has no canonical JSON: " + err.Error()
		}
		return nil, refusal(Details{Reason: ReasonBadSignature, Pack: m.Name, KeyID: keyID},
			"the signature in %s is not key %q's over pack.json: %s", sigPath, keyID, why)
	}
	if !key.Permits(m.Name) {
		return nil, refusal(Details{Reason: ReasonNamespaceNotPermitted, Pack: m.Name, KeyID: keyID, Namespaces: key.Namespaces},
			"key %q may sign packs named %s, not %s", keyID, strings.Join(key.Namespaces, ", "), m.Name)
	}
	if m.EntrySHA256 == "" {
		return nil, refusal(Details{Reason: ReasonEntryDigestMissing, Pack: m.Name, KeyID: keyID},
			"the signed pack.json has no %s, so its binary is not signed; sign it with `host packs sign`, which writes the digest", packmanifest.EntrySHA256Key)
	}
	if m.Files == nil {
		return nil, refusal(Details{Reason: ReasonFilesDigestMissing, Pack: m.Name, KeyID: keyID},
			"the signed pack.json has no %s: its signature covers pack.json and the binary only, not the pack's other files; sign the pack again with `host packs sign`", packmanifest.FilesKey)
	}
	if err := checkFiles(root, m.Files, path.Clean(m.Runtime.Entry)); err != nil {
		d := err.details
		d.Pack, d.KeyID = m.Name, keyID
		return nil, refusal(d, "the pack %s is not as signed: %s", m.Name, err.msg)
	}
	return &Verified{KeyID: keyID, EntrySHA256: m.EntrySHA256}, nil
}

// fileProblem is what is wrong with a file of a signed pack.
type fileProblem struct {
	details Details
	msg     string
}

// checkFiles compares the digests of the files under root with signed,
// pack.json's file digest map, and returns the first problem in path
// order, saying how many files have one. A changed entry binary, entry,
// is ReasonEntryDigestMismatch, as when the host checks it on the opened
// binary.
func checkFiles(root *os.Root, signed map[string]string, entry string) *fileProblem {
	actual, p := digestTree(root)
	if p != nil {
		return p
	}
	names := make([]string, 0, len(signed)+len(actual))
	for name := range signed {
		names = append(names, name)
	}
	for name := range actual {
		if _, ok := signed[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var first *fileProblem
	count := 0
	for _, name := range names {
		want, listed := signed[name]
		got, present := actual[name]
		var fp *fileProblem
		switch {
		case !listed:
			fp = &fileProblem{Details{Reason: ReasonFileNotSigned, File: name}, fmt.Sprintf("%s was not signed (added since)", name)}
		case !present:
			fp = &fileProblem{Details{Reason: ReasonFileMissing, File: name}, fmt.Sprintf("%s, signed, is missing", name)}
		case got != want && name == entry:
			fp = &fileProblem{Details{Reason: ReasonEntryDigestMismatch, File: name, Expected: want, Actual: got},
				fmt.Sprintf("the binary %s is not the one signed: its sha256 is %s, the signed one %s", name, got, want)}
		case got != want:
			fp = &fileProblem{Details{Reason: ReasonFileDigestMismatch, File: name, Expected: want, Actual: got},
				fmt.Sprintf("%s changed since signing: its sha256 is %s, the signed one %s", name, got, want)}
		default:
			continue
		}
		count++
		if first == nil {
			first = fp
		}
	}
	if count > 1 {
		first.msg += fmt.Sprintf(" (and %d other files are not as signed)", count-1)
	}
	return first
}

// Digests returns the SHA-256, lowercase hex, of every file under the
// pack directory dir but pack.json and the signature file, by path
// relative to dir and slash-separated: the map a signed pack.json carries
// under packmanifest.FilesKey. Files are read through an os.Root of dir;
// a symbolic link, or any other file that is neither a regular file nor a
// directory, is refused, and so are more than MaxFiles files.
func Digests(dir string) (map[string]string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	sums, p := digestTree(root)
	if p != nil {
		return nil, fmt.Errorf("%s: %s", dir, p.msg)
	}
	return sums, nil
}

// digestTree is Digests on an open root.
func digestTree(root *os.Root) (map[string]string, *fileProblem) {
	sums := map[string]string{}
	irregular := func(name, what string) *fileProblem {
		return &fileProblem{Details{Reason: ReasonFileNotRegular, File: name},
			fmt.Sprintf("%s is %s; a signed pack holds regular files and directories only", name, what)}
	}
	var problem *fileProblem
	err := fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			problem = &fileProblem{Details{Reason: ReasonFileNotRegular, File: name}, fmt.Sprintf("%s cannot be read: %v", name, err)}
			return fs.SkipAll
		}
		switch t := d.Type(); {
		case t.IsDir():
			return nil
		case t&fs.ModeSymlink != 0:
			problem = irregular(name, "a symbolic link")
			return fs.SkipAll
		case !t.IsRegular():
			problem = irregular(name, "not a regular file ("+t.String()+")")
			return fs.SkipAll
		}
		if name == packmanifest.FileName || name == FileName {
			return nil
		}
		if len(sums) == MaxFiles {
			problem = &fileProblem{Details{Reason: ReasonFileNotRegular, File: name},
				fmt.Sprintf("the pack holds more than %d files", MaxFiles)}
			return fs.SkipAll
		}
		sum, err := digestFile(root, name)
		if err != nil {
			problem = &fileProblem{Details{Reason: ReasonFileNotRegular, File: name}, fmt.Sprintf("%s %v", name, err)}
			return fs.SkipAll
		}
		sums[name] = sum
		return nil
	})
	if problem == nil && err != nil {
		problem = &fileProblem{Details{Reason: ReasonFileNotRegular}, err.Error()}
	}
	if problem != nil {
		return nil, problem
	}
	return sums, nil
}

// digestFile hashes the regular file name inside root.
func digestFile(root *os.Root, name string) (string, error) {
	f, err := openRegular(root, name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("cannot be read: %v", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// openRegular opens name inside root, refusing it unless it is a regular
// file itself: os.Root follows a symbolic link that stays inside the root,
// so the file's own entry is checked first, and the file opened must be
// that one, not whatever a link put there meanwhile points to.
func openRegular(root *os.Root, name string) (*os.File, error) {
	before, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if before.Mode()&fs.ModeSymlink != 0 {
		return nil, errors.New("is a symbolic link; it must be a regular file in the pack")
	}
	if !before.Mode().IsRegular() {
		return nil, fmt.Errorf("is not a regular file (%s)", before.Mode().Type())
	}
	// O_NONBLOCK: a FIFO swapped in after the check must not hang the
	// open.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	after, err := f.Stat()
	if err != nil || !os.SameFile(before, after) {
		f.Close()
		return nil, errors.New("changed while it was opened")
	}
	return f, nil
}

// DigestMismatch is the refusal of a signed pack whose entry binary at
// path has the digest actual rather than the signed expected one.
func DigestMismatch(pack, keyID, path, expected, actual string) *wop.Error {
	return refusal(Details{Reason: ReasonEntryDigestMismatch, Pack: pack, KeyID: keyID, Expected: expected, Actual: actual},
		"the binary %s is not the one signed: its sha256 is %s, pack.json's %s is %s", path, actual, packmanifest.EntrySHA256Key, expected)
}

// readSmall reads the regular file name inside root, of at most
// MaxFileSize bytes.
func readSmall(root *os.Root, name string) ([]byte, error) {
	f, err := openRegular(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("is larger than %d bytes", MaxFileSize)
	}
	return data, nil
}
