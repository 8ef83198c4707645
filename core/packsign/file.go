package packsign

import (
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
)

// FileScheme is the scheme of a detached signature of a whole file, such
// as a release's SHA256SUMS: Ed25519ctx (RFC 8032) over the file's bytes
// with FileContext as its context. The context keeps the two uses of one
// key apart: a file signature never verifies as a pack signature (pure
// Ed25519 over canonical JSON), nor a pack signature as a file's.
const FileScheme = "ed25519ctx-file"

// FileContext is the Ed25519ctx context string of FileScheme.
const FileContext = "wophost signed file v1"

// FileSignatureSuffix is appended to a file's name to name its detached
// signature: SHA256SUMS.sig.
const FileSignatureSuffix = ".sig"

// FileSignature is the detached signature file of a whole file.
type FileSignature struct {
	Scheme string
	KeyID  string
	// Value is the 64-byte Ed25519ctx signature over the file's bytes.
	Value []byte
}

var fileOptions = &ed25519.Options{Hash: crypto.Hash(0), Context: FileContext}

// SignFile signs data, a file's bytes, with key, naming it keyID.
func SignFile(key ed25519.PrivateKey, keyID string, data []byte) (*FileSignature, error) {
	if !ValidKeyID(keyID) {
		return nil, fmt.Errorf("key id %q: a key id is 1 to 128 letters, digits and ._~-", keyID)
	}
	sig, err := key.Sign(nil, data, fileOptions)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	return &FileSignature{Scheme: FileScheme, KeyID: keyID, Value: sig}, nil
}

// VerifyFile reports whether sig is pub's signature over data. keyID,
// when not "", is the id of the key the verifier trusts, which the
// signature must name: a signature by another key of the same signer is
// refused by name rather than as a bad signature.
func VerifyFile(pub ed25519.PublicKey, keyID string, data []byte, sig *FileSignature) error {
	if keyID != "" && sig.KeyID != keyID {
		return fmt.Errorf("the signature is by key %q, not by the key %q given to check it with", sig.KeyID, keyID)
	}
	if err := ed25519.VerifyWithOptions(pub, data, sig.Value, fileOptions); err != nil {
		return errors.New("the signature does not verify with this public key: the file or the signature changed since signing, or another key signed it")
	}
	return nil
}

// Marshal returns the signature file's bytes.
func (s *FileSignature) Marshal() []byte {
	return marshal(struct {
		Scheme    string `json:"scheme"`
		KeyID     string `json:"keyId"`
		Signature string `json:"signature"`
	}{s.Scheme, s.KeyID, base64.StdEncoding.EncodeToString(s.Value)})
}

// ParseFileSignature reads a file signature: one closed JSON object, no
// larger than MaxFileSize, of FileScheme, with a valid key id and a
// signature of exactly ed25519.SignatureSize bytes.
func ParseFileSignature(data []byte) (*FileSignature, error) {
	scheme, keyID, sig, err := parseSignatureObject(data)
	if err != nil {
		return nil, err
	}
	if scheme != FileScheme {
		return nil, fmt.Errorf("scheme %q: a file signature's scheme is %q", scheme, FileScheme)
	}
	return &FileSignature{Scheme: scheme, KeyID: keyID, Value: sig}, nil
}
