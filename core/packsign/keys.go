package packsign

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// A key pair is kept in two JSON files: the private key file, which only
// the vendor's signing machine holds (mode 0600), and the public key
// file, which the vendor hands to operators. Both name the key id and the
// scheme, so that a key is never used under another id by mistake.

// PrivateKeyFile is the private key file's content.
type PrivateKeyFile struct {
	KeyID  string `json:"keyId"`
	Scheme string `json:"scheme"`
	// PrivateKey is the 32-byte Ed25519 seed, standard base64.
	PrivateKey string `json:"privateKey"`
}

// PublicKeyFile is the public key file's content.
type PublicKeyFile struct {
	KeyID  string `json:"keyId"`
	Scheme string `json:"scheme"`
	// PublicKey is the 32-byte Ed25519 public key, standard base64, as
	// the config's trusted_key block takes it.
	PublicKey string `json:"publicKey"`
}

// MarshalPrivateKey returns the private key file of key, named id.
func MarshalPrivateKey(id string, key ed25519.PrivateKey) []byte {
	return marshal(PrivateKeyFile{KeyID: id, Scheme: Scheme, PrivateKey: base64.StdEncoding.EncodeToString(key.Seed())})
}

// MarshalPublicKey returns the public key file of pub, named id.
func MarshalPublicKey(id string, pub ed25519.PublicKey) []byte {
	return marshal(PublicKeyFile{KeyID: id, Scheme: Scheme, PublicKey: EncodePublicKey(pub)})
}

func marshal(v any) []byte {
	b, _ := json.MarshalIndent(v, "", "  ")
	return append(b, '\n')
}

// ParsePrivateKey reads a private key file, returning its key id and key.
func ParsePrivateKey(data []byte) (string, ed25519.PrivateKey, error) {
	var f PrivateKeyFile
	if err := decodeClosed(data, &f); err != nil {
		return "", nil, err
	}
	if err := checkHeader(f.KeyID, f.Scheme); err != nil {
		return "", nil, err
	}
	seed, err := base64.StdEncoding.Strict().DecodeString(f.PrivateKey)
	if err != nil || len(seed) != ed25519.SeedSize {
		return "", nil, fmt.Errorf("privateKey: must be a %d-byte Ed25519 seed in standard base64", ed25519.SeedSize)
	}
	return f.KeyID, ed25519.NewKeyFromSeed(seed), nil
}

// ParsePublicKeyFile reads a public key file, returning its key id and
// key.
func ParsePublicKeyFile(data []byte) (string, ed25519.PublicKey, error) {
	var f PublicKeyFile
	if err := decodeClosed(data, &f); err != nil {
		return "", nil, err
	}
	if err := checkHeader(f.KeyID, f.Scheme); err != nil {
		return "", nil, err
	}
	pub, err := ParsePublicKey(f.PublicKey)
	if err != nil {
		return "", nil, fmt.Errorf("publicKey: %w", err)
	}
	return f.KeyID, pub, nil
}

func checkHeader(id, scheme string) error {
	switch {
	case id == "":
		return errors.New(`needs "keyId"`)
	case !ValidKeyID(id):
		return fmt.Errorf("keyId %q: a key id is 1 to 128 letters, digits and ._~-", id)
	case scheme != Scheme:
		return fmt.Errorf("scheme %q: the one scheme is %q", scheme, Scheme)
	}
	return nil
}
