package promptfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

// FuzzParse feeds arbitrary bytes to the .prompt parser. Nothing may
// panic; a refusal is an *Error with a message; nothing over MaxBytes or
// outside UTF-8 is accepted; an accepted file has a valid name (so it is
// a safe relative path), a valid version when one is given, JSON
// variables, and a body that is the input's tail; parsing never modifies
// the input.
func FuzzParse(f *testing.F) {
	f.Add([]byte("---\nname: greet\nversion: \"1.10\"\nenvelopeType: greeting\nvariables:\n  type: object\n  properties:\n    who: {type: string}\n---\nHello {{who}}\n"))
	f.Add([]byte("---\r\nname: a/b\r\n---\r\n"))
	f.Add([]byte("---\nname: ../x\n---\nbody"))
	f.Add([]byte("---\nname: x\nname: y\n---\n"))
	f.Add([]byte("---\n&a [*a, *a]\n---\n"))
	f.Add([]byte("---\nname: x\nvariables: {type: 7}\n---\n"))
	f.Add([]byte("no header"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		orig := bytes.Clone(raw)
		pf, err := Parse(raw)
		if !bytes.Equal(raw, orig) {
			t.Fatal("Parse modified its input")
		}
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Message == "" {
				t.Fatalf("refusal %v (%T) is not an *Error with a message", err, err)
			}
			return
		}
		if len(raw) > MaxBytes {
			t.Fatalf("accepted %d bytes, over MaxBytes", len(raw))
		}
		if err := promptlibrary.CheckName(pf.Name); err != nil {
			t.Fatalf("accepted name %q: %v", pf.Name, err)
		}
		if pf.Version != "" {
			if err := promptlibrary.CheckVersion(pf.Version); err != nil {
				t.Fatalf("accepted version %q: %v", pf.Version, err)
			}
		}
		if pf.Variables != nil && !json.Valid(pf.Variables) {
			t.Fatalf("variables are not JSON: %s", pf.Variables)
		}
		if !strings.HasSuffix(string(raw), pf.Body) {
			t.Fatalf("body %q is not the tail of the file", pf.Body)
		}
	})
}
