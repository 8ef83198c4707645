package packsign

import (
	"bytes"
	"crypto/ed25519"
	"testing"
)

// FuzzParseSignature feeds arbitrary bytes to the signature file parser.
// Nothing may panic; what it accepts is a well-formed signature of the
// one scheme, which Marshal writes back to a file that parses the same.
func FuzzParseSignature(f *testing.F) {
	sig, _ := Sign(seededKey(1), "acme-2026", []byte(`{"name":"vendor.acme.tools"}`))
	f.Add(sig.Marshal())
	f.Add([]byte(`{"scheme":"ed25519-canonical-json","keyId":"k","signature":"AA=="}`))
	f.Add([]byte(`{"scheme":"ed25519-canonical-json","keyId":"k","keyId":"j","signature":""}`))
	f.Add([]byte(`{"scheme":null,"keyId":"k","signature":"x"} []`))
	f.Add([]byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSignature(data)
		if err != nil {
			return
		}
		if s.Scheme != Scheme || !ValidKeyID(s.KeyID) || len(s.Value) != ed25519.SignatureSize {
			t.Fatalf("accepted %+v", s)
		}
		again, err := ParseSignature(s.Marshal())
		if err != nil || again.KeyID != s.KeyID || !bytes.Equal(again.Value, s.Value) {
			t.Fatalf("round trip: %+v, %v", again, err)
		}
	})
}

// FuzzParsePrivateKey does the same for the private key file.
func FuzzParsePrivateKey(f *testing.F) {
	f.Add(MarshalPrivateKey("acme-2026", seededKey(1)))
	f.Add([]byte(`{"keyId":"k","scheme":"ed25519-canonical-json","privateKey":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, key, err := ParsePrivateKey(data)
		if err != nil {
			return
		}
		if !ValidKeyID(id) || len(key) != ed25519.PrivateKeySize {
			t.Fatalf("accepted %q, %d-byte key", id, len(key))
		}
	})
}
