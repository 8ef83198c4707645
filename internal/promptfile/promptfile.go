// Package promptfile parses the .prompt authoring format: a YAML header
// between two "---" lines, then the template body.
//
//	---
//	name: support/triage
//	version: 3                  # optional; the store assigns the next integer
//	envelopeType: chat          # optional
//	description: Sorts tickets  # optional
//	variables:                  # optional JSON Schema of the template's variables
//	  type: object
//	  properties:
//	    product: {type: string}
//	---
//	You sort support tickets for {{product}}.
//
// The whole file is what the store keeps and hashes, byte for byte; the
// header and the body are derived from those bytes only, so the same bytes
// always give the same prompt. The body (the system prompt) is everything
// after the line ending of the closing "---", unchanged: line endings,
// trailing spaces and a missing final newline are all kept.
package promptfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

// MaxBytes bounds a .prompt file. A prompt travels inside one message
// (twice over: raw and the system prompt), so this stays well under the
// host's default maximum message size of 16 MiB.
const MaxBytes = 4 << 20

// Fence opens and closes the header.
const Fence = "---"

// File is a parsed .prompt file.
type File struct {
	// Name is the prompt name (header "name", required).
	Name string
	// Version is the header's version, or "" when the store is to assign
	// one.
	Version      string
	EnvelopeType string
	Description  string
	// Variables is the JSON Schema of the template's variables, as
	// compact JSON, or nil.
	Variables json.RawMessage
	// Body is the system prompt template: the bytes after the header.
	Body string
}

// Answer is promptLibrary.get's answer for promptID: the stored version
// (name, version, digest) whose verbatim bytes raw parsed into f.
func (f *File) Answer(promptID, name, version, digest string, raw []byte) *promptlibrary.Prompt {
	return &promptlibrary.Prompt{
		PromptID:     promptID,
		Name:         name,
		Version:      version,
		Digest:       digest,
		SystemPrompt: f.Body,
		EnvelopeType: f.EnvelopeType,
		Variables:    f.Variables,
		Raw:          string(raw),
	}
}

// Error is a problem with a .prompt file, naming the header field when
// there is one.
type Error struct {
	// Field is the header key at fault, or "" for the file as a whole.
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return "header field " + e.Field + ": " + e.Message
}

// Parse parses raw. It never modifies raw, and the result depends on raw
// alone.
func Parse(raw []byte) (*File, error) {
	if len(raw) > MaxBytes {
		return nil, &Error{Message: fmt.Sprintf("file is %d bytes, over the %d-byte limit", len(raw), MaxBytes)}
	}
	if !utf8.Valid(raw) {
		return nil, &Error{Message: "file is not valid UTF-8 text"}
	}
	header, body, err := split(raw)
	if err != nil {
		return nil, err
	}
	f := &File{Body: string(body)}
	if err := f.decodeHeader(header); err != nil {
		return nil, err
	}
	return f, nil
}

// split cuts raw into the header (between the fences) and the body (after
// the closing fence's line ending).
func split(raw []byte) (header, body []byte, err error) {
	first, rest, ok := cutLine(raw)
	if !ok || string(first) != Fence {
		return nil, nil, &Error{Message: `file must start with a "---" line that opens the header`}
	}
	start := len(raw) - len(rest)
	for pos := start; pos < len(raw); {
		line, next, _ := cutLine(raw[pos:])
		if string(line) == Fence {
			return raw[start:pos], next, nil
		}
		pos = len(raw) - len(next)
	}
	return nil, nil, &Error{Message: `the header has no closing "---" line`}
}

// cutLine returns the first line of b without its "\n" or "\r\n", and what
// follows the line ending. ok is false when b holds no line ending.
func cutLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil, false
	}
	line = b[:i]
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, b[i+1:], true
}

func (f *File) decodeHeader(header []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(header, &doc); err != nil {
		return &Error{Message: "header is not valid YAML: " + err.Error()}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return &Error{Field: "name", Message: "is required"}
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return &Error{Message: "header must be a YAML mapping of fields"}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, val := m.Content[i].Value, m.Content[i+1]
		if seen[key] {
			return &Error{Field: key, Message: "appears twice"}
		}
		seen[key] = true
		var err error
		switch key {
		case "name":
			f.Name, err = scalar(val)
			if err == nil {
				err = promptlibrary.CheckName(f.Name)
			}
		case "version":
			// The literal text: YAML would read 1.10 as the number 1.1.
			f.Version, err = scalar(val)
			if err == nil {
				err = promptlibrary.CheckVersion(f.Version)
			}
		case "envelopeType":
			f.EnvelopeType, err = scalar(val)
		case "description":
			f.Description, err = scalar(val)
		case "variables":
			f.Variables, err = schemaJSON(val)
		default:
			if !strings.HasPrefix(key, "x-") {
				err = errors.New(`is not a known field (name, version, envelopeType, description, variables; extensions use an "x-" prefix)`)
			}
		}
		if err != nil {
			return &Error{Field: key, Message: err.Error()}
		}
	}
	if f.Name == "" {
		return &Error{Field: "name", Message: "is required"}
	}
	return nil
}

func scalar(n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", errors.New("must be a single value")
	}
	return n.Value, nil
}

// schemaJSON converts a YAML mapping into compact JSON and checks that it
// compiles as a JSON Schema, so a broken schema is refused at publish
// rather than discovered by a node.
func schemaJSON(n *yaml.Node) (json.RawMessage, error) {
	if n.Kind != yaml.MappingNode {
		return nil, errors.New("must be a JSON Schema object")
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cannot be expressed as JSON: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("variables.json", doc); err != nil {
		return nil, err
	}
	if _, err := c.Compile("variables.json"); err != nil {
		return nil, fmt.Errorf("is not a valid JSON Schema: %w", err)
	}
	return b, nil
}
