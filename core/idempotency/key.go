// Package idempotency keeps the outcomes of node runs made under an
// idempotency key, so that a repeated request is answered with the
// recorded outcome instead of running the node again (OpenWOP's Layer 1
// rules): the key grammar, the request digest, which outcomes are kept,
// and the store behind a small interface with a crash-safe file
// implementation.
package idempotency

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/wophost/wophost/sdk/wop"
)

// Error codes of the idempotency rules, in OpenWOP's spelling.
const (
	// CodeKeyInvalid is a key outside the grammar, or two different keys
	// given for one request (400, never kept).
	CodeKeyInvalid = "idempotency_key_invalid"
	// CodeKeyMismatch is a key already used for a different request (409).
	CodeKeyMismatch = wop.CodeIdempotencyKeyMismatch
	// CodeInFlight is a key whose first request is still running (409,
	// retryable: the repeat gets the outcome once it is recorded).
	CodeInFlight = "idempotency_in_flight"
)

// Key length bounds of the grammar ^[A-Za-z0-9._~-]{22,128}$. 22
// characters of the 64-letter alphabet carry the 128 bits of entropy a
// key needs; the grammar cannot check entropy, only make room for it.
const (
	MinKeyLen = 22
	MaxKeyLen = 128
)

// CheckKey returns nil when key matches ^[A-Za-z0-9._~-]{22,128}$ and an
// idempotency_key_invalid error saying what is wrong otherwise. The error
// never repeats the key: keys do not appear in logs.
func CheckKey(key string) error {
	if len(key) < MinKeyLen || len(key) > MaxKeyLen {
		return wop.Errorf(CodeKeyInvalid, "an idempotency key must be %d to %d characters long; this one has %d", MinKeyLen, MaxKeyLen, len(key))
	}
	for i := 0; i < len(key); i++ {
		if !keyByte(key[i]) {
			return wop.Errorf(CodeKeyInvalid, "an idempotency key may hold only A-Z, a-z, 0-9 and . _ ~ -; character %d is not one of them", i+1)
		}
	}
	return nil
}

func keyByte(c byte) bool {
	switch {
	case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	}
	return c == '.' || c == '_' || c == '~' || c == '-'
}

// ID is the store identity of key within scope (the authenticated
// caller): a hex SHA-256, so that neither the key nor the credential it
// came with is ever written down.
func ID(scope, key string) string {
	h := sha256.New()
	h.Write([]byte("wophost idempotency v1\x00"))
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return hex.EncodeToString(h.Sum(nil))
}

// Scope returns the scope of a caller that authenticated with credential:
// a digest of it, never the credential itself. The empty credential (no
// authentication, or the operator's CLI) is the empty scope.
func Scope(credential string) string {
	if credential == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("wophost idempotency scope v1\x00" + credential))
	return hex.EncodeToString(sum[:16])
}
