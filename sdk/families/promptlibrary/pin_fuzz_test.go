package promptlibrary

import (
	"strings"
	"testing"
)

// FuzzParsePin checks the pin grammar on arbitrary strings: no panic, an
// error always quotes what was refused, an accepted pin has a safe name
// (no "..", no leading "/", no backslash) and formats back to a string
// that parses to the same pin.
func FuzzParsePin(f *testing.F) {
	for _, s := range []string{
		"greet@1", "team/greet@1.2.0-rc.1+b", "greet@sha256:" + strings.Repeat("a", 64),
		"greet@3#sha256:" + strings.Repeat("0", 64), "../greet@1", "greet", "greet@latest",
		"greet@1#", "a/./b@1", "@", "greet@sha256:", "/abs@1", `a\b@1`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		p, err := ParsePin(ref)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if CheckName(p.Name) != nil || strings.HasPrefix(p.Name, "/") || strings.Contains(p.Name, `\`) {
			t.Fatalf("accepted unsafe name %q from %q", p.Name, ref)
		}
		for _, seg := range strings.Split(p.Name, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("accepted path segment %q in %q", seg, ref)
			}
		}
		if p.Version == "" && p.Digest == "" {
			t.Fatalf("accepted %q with neither version nor digest", ref)
		}
		back, err := ParsePin(p.String())
		if err != nil || back != p {
			t.Fatalf("round trip of %q: %+v -> %q -> %+v (%v)", ref, p, p.String(), back, err)
		}
	})
}
