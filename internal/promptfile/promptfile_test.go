package promptfile

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	raw := "---\r\nname: support/triage\r\nversion: 1.10\r\nenvelopeType: chat\r\ndescription: Sorts tickets\r\n" +
		"variables:\r\n  type: object\r\n  properties:\r\n    product: {type: string}\r\nx-owner: ops\r\n---\r\n" +
		"You sort tickets for {{product}}.  \r\n\r\n---\r\nnot a header\r\n"
	f, err := Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "support/triage" || f.Version != "1.10" || f.EnvelopeType != "chat" || f.Description != "Sorts tickets" {
		t.Errorf("header = %+v", f)
	}
	if got := string(f.Variables); got != `{"properties":{"product":{"type":"string"}},"type":"object"}` {
		t.Errorf("variables = %s", got)
	}
	// The body is every byte after the closing fence's line ending: a later
	// "---" line belongs to it.
	if want := "You sort tickets for {{product}}.  \r\n\r\n---\r\nnot a header\r\n"; f.Body != want {
		t.Errorf("body = %q, want %q", f.Body, want)
	}
}

func TestParseEmptyBody(t *testing.T) {
	f, err := Parse([]byte("---\nname: p\n---"))
	if err != nil {
		t.Fatalf("a closing fence without a newline: %v", err)
	}
	if f.Body != "" {
		t.Errorf("body = %q", f.Body)
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]string{
		"":                                          "",
		"name: p\n":                                 "",
		"---\nname: p\n":                            "",
		"---\n---\nbody":                            "name",
		"---\nname: [a]\n---\n":                     "name",
		"---\nversion: 1\n---\n":                    "name",
		"---\nname: p\nversion: latest\n---\n":      "version",
		"---\nname: p\nversion: ~\n---\n":           "version",
		"---\nname: p\nvariables: nope\n---\n":      "variables",
		"---\nname: p\nvariables: {type: 3}\n---\n": "variables",
		"---\nname: p\nname: q\n---\n":              "",
		"---\nname: p\nmodel: x\n---\n":             "model",
		"---\n- a\n---\n":                           "",
		"---\nname: p\n---\n\xc3\x28":               "",
	}
	for raw, field := range cases {
		_, err := Parse([]byte(raw))
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) = %v, want *Error", raw, err)
			continue
		}
		if field != "" && pe.Field != field {
			t.Errorf("Parse(%q) blames field %q, want %q (%v)", raw, pe.Field, field, err)
		}
	}
}
