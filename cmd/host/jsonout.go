package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// jsonOut is how the CLI prints JSON: strings at their shortest, so that
// '<', '>' and '&' print as themselves rather than as \u003c, \u003e and
// \u0026 (encoding/json escapes them for HTML, and so may a plugin's
// answer on the wire), U+2028 and U+2029 escaped as encoding/json does;
// member order, numbers and duplicate names as they are.
var jsonOut = []jsontext.Options{
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
	jsontext.EscapeForHTML(false),
	jsontext.EscapeForJS(true),
	jsontext.PreserveRawStrings(false),
}

// formatJSON returns raw, one JSON value, as the CLI prints it: indented
// by two spaces, or compact.
func formatJSON(raw []byte, indent bool) ([]byte, error) {
	v := jsontext.Value(append([]byte(nil), raw...))
	opts := jsonOut
	if indent {
		opts = append(opts[:len(opts):len(opts)], jsontext.Multiline(true), jsontext.WithIndent("  "))
	}
	if err := v.Format(opts...); err != nil {
		return nil, err
	}
	return v, nil
}

// writeJSON writes v as JSON on a line of its own, as formatJSON prints
// it. A json.RawMessage or jsontext.Value is printed as the value it
// holds.
func writeJSON(w io.Writer, v any, indent bool) error {
	var raw []byte
	switch r := v.(type) {
	case json.RawMessage:
		raw = r
	case jsontext.Value:
		raw = r
	default:
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return fmt.Errorf("encode the output: %w", err)
		}
	}
	out, err := formatJSON(raw, indent)
	if err != nil {
		return fmt.Errorf("format the output: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", out)
	return err
}

// encode writes v to stdout as compact JSON on a line of its own: the
// --json output of a command.
func (g *globals) encode(v any) error {
	return writeJSON(g.stdout, v, false)
}
