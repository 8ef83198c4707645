package promptlibrary

import (
	"errors"
	"strings"
	"testing"
)

const hexA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestParsePinAccepts(t *testing.T) {
	cases := map[string]Pin{
		"summarize@3":                          {Name: "summarize", Version: "3"},
		"summarize@1.2.0":                      {Name: "summarize", Version: "1.2.0"},
		"summarize@2.0.0-rc.1+b7":              {Name: "summarize", Version: "2.0.0-rc.1+b7"},
		"summarize@sha256:" + hexA:             {Name: "summarize", Digest: "sha256:" + hexA},
		"team/triage/system@12#sha256:" + hexA: {Name: "team/triage/system", Version: "12", Digest: "sha256:" + hexA},
		"a.b_c-d/0x@0":                         {Name: "a.b_c-d/0x", Version: "0"},
		strings.Repeat("s", 64) + "/x@1":       {Name: strings.Repeat("s", 64) + "/x", Version: "1"},
	}
	for ref, want := range cases {
		got, err := ParsePin(ref)
		if err != nil {
			t.Errorf("ParsePin(%q): %v", ref, err)
			continue
		}
		if got != want {
			t.Errorf("ParsePin(%q) = %+v, want %+v", ref, got, want)
		}
		if got.String() != ref {
			t.Errorf("String() = %q, want %q", got.String(), ref)
		}
	}
}

// Every unpinned or malformed form is refused; nothing is guessed.
func TestParsePinRefuses(t *testing.T) {
	for _, ref := range []string{
		"summarize", "summarize@latest", "summarize@production", "summarize@", "@3",
		"summarize@~3", "summarize@>=2", "summarize@v3", "summarize@03", "summarize@3#",
		"summarize@sha256:" + strings.ToUpper(hexA), "summarize@sha512:" + hexA, "summarize@sha256:abc",
		"summarize@3#sha1:" + hexA, "Summarize@3", "../x@1", "a/../b@1", "/abs@1", "a//b@1", "./a@1",
		"a/.@1", "a\\b@1", "a b@1", "a@1@2", "",
		strings.Repeat("s", 65) + "/x@1", "summarize@sha256:" + hexA[:63], "summarize@sha256:" + hexA + "0",
	} {
		if p, err := ParsePin(ref); err == nil {
			t.Errorf("ParsePin(%q) = %+v, want an error", ref, p)
		}
	}
}

// A reference that names no fixed prompt wraps ErrUnpinned; a malformed
// one does not, so callers can tell prompt_unpinned from a bad reference.
func TestParsePinUnpinned(t *testing.T) {
	for ref, unpinned := range map[string]bool{
		"summarize": true, "summarize@latest": true, "summarize@": true, "summarize@v3": true,
		"Summarize@3": false, "summarize@sha256:abc": false, "a b": false,
	} {
		_, err := ParsePin(ref)
		if err == nil || errors.Is(err, ErrUnpinned) != unpinned {
			t.Errorf("ParsePin(%q) = %v; wraps ErrUnpinned: want %v", ref, err, unpinned)
		}
	}
}

func TestIsBareName(t *testing.T) {
	for ref, want := range map[string]bool{
		"summarize": true, "team/triage": true, "summarize@3": false, "Bad": false, "../x": false, "": false,
	} {
		if got := IsBareName(ref); got != want {
			t.Errorf("IsBareName(%q) = %v", ref, got)
		}
	}
}

func TestCheckAnswer(t *testing.T) {
	raw := "---\nname: p\n---\nhi\n"
	good := Prompt{Name: "p", Version: "1", Digest: DigestOf([]byte(raw)), Raw: raw}
	pin := Pin{Name: "p", Version: "1", Digest: good.Digest}
	if err := CheckAnswer(&good, pin); err != nil {
		t.Fatalf("faithful answer refused: %v", err)
	}
	bad := []func(p *Prompt){
		func(p *Prompt) { p.Raw += " " },
		func(p *Prompt) { p.Name = "q" },
		func(p *Prompt) { p.Version = "2" },
		func(p *Prompt) { p.Digest = "sha256:" + hexA },
	}
	for i, mutate := range bad {
		p := good
		mutate(&p)
		if err := CheckAnswer(&p, pin); err == nil {
			t.Errorf("case %d: unfaithful answer %+v accepted", i, p)
		}
	}
	// A different version with a self-consistent digest does not answer a
	// digest pin.
	other := "---\nname: p\n---\nother\n"
	p := Prompt{Name: "p", Version: "2", Digest: DigestOf([]byte(other)), Raw: other}
	if err := CheckAnswer(&p, Pin{Name: "p", Digest: good.Digest}); err == nil {
		t.Error("answer with another digest accepted for a digest pin")
	}
}
