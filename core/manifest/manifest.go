// Package manifest parses and validates a node pack's pack.json and derives
// from it what the host checks at load and at dispatch: the pack's peer
// requirements, each node's requirements, what a node may call, and whether
// an input matches the node's inputSchema.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/wophost/wophost/sdk/wop"
)

// FileName is the name of the manifest file in a pack directory.
const FileName = "pack.json"

// MaxSize is the largest manifest accepted, in bytes.
const MaxSize = 4 << 20

// Peer dependency values.
const (
	Required = "required"
	Optional = "optional"
)

// Manifest is a parsed pack.json. After Parse or Validate, legacy v1 peer
// dependency spellings have been rewritten to their v2 form.
type Manifest struct {
	Name                 string              `json:"name"`
	Version              string              `json:"version"`
	Kind                 string              `json:"kind"`
	Description          string              `json:"description,omitempty"`
	Runtime              Runtime             `json:"runtime"`
	PeerDependencies     map[string]string   `json:"peerDependencies,omitempty"`
	PeerDependenciesMeta map[string]PeerMeta `json:"peerDependenciesMeta,omitempty"`
	Nodes                []Node              `json:"nodes,omitempty"`
	// Agents are agent manifests, kept raw for the agent runtime to check.
	Agents []json.RawMessage `json:"agents,omitempty"`
	// Prompts is the prompt lock map: prompt name to pinned reference.
	Prompts map[string]string `json:"prompts,omitempty"`
	Engines map[string]string `json:"engines,omitempty"`
}

// Runtime says how to start the pack.
type Runtime struct {
	Language string `json:"language"`
	// Entry is the executable, relative to the pack directory.
	Entry string `json:"entry"`
}

// PeerMeta refines one peer dependency.
type PeerMeta struct {
	Facets   []string `json:"facets,omitempty"`
	Optional bool     `json:"optional,omitempty"`
}

// Node is one node type of the pack.
type Node struct {
	TypeID       string          `json:"typeId"`
	Version      string          `json:"version"`
	Category     string          `json:"category"`
	Role         string          `json:"role"`
	Requires     []string        `json:"requires,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Description  string          `json:"description,omitempty"`

	// Compiled by Validate so that dispatch never recompiles.
	input, output *jsonschema.Schema
}

// Problem is one reason a manifest is refused, as listed in the details of
// a pack_validation_failed error.
type Problem struct {
	// Field is the JSON pointer of the offending value ("" for the whole
	// document).
	Field   string `json:"field"`
	Message string `json:"message"`
	// Line and Column locate the problem in the file, both from 1 (the
	// column counts characters), when the JSON decoder said where it
	// stopped: a syntax error, or a document that is not an object. They
	// are 0 otherwise; Field then says where to look.
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
}

// isTopLevelKey reports whether a manifest may carry key; "$schema" is
// there because editors add it and it means nothing to the host.
func isTopLevelKey(key string) bool {
	switch key {
	case "name", "version", "kind", "description", "runtime", "peerDependencies",
		"peerDependenciesMeta", "nodes", "agents", "prompts", "engines", "$schema":
		return true
	}
	return false
}

// vendorHatch matches top-level keys that extensions may add and the host
// ignores.
var vendorHatch = regexp.MustCompile(`^(x-|openwop-|vendor\.)`)

// Load reads and parses dir/pack.json, returning the manifest and the raw
// bytes (which a pack binary's embedded copy is compared against). Read
// failures are the *os.PathError values, which name the file; a refused
// manifest is a pack_validation_failed *wop.Error whose message starts with
// the file's path.
func Load(dir string) (*Manifest, []byte, error) {
	path := filepath.Join(dir, FileName)
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	// Read one byte past the limit so that an oversized file is detected
	// without reading all of it.
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, nil, err
	}
	m, err := parse(data, path)
	if err != nil {
		return nil, nil, err
	}
	return m, data, nil
}

// Parse decodes and validates a manifest. Unknown top-level keys are
// refused unless they start with "x-", "openwop-" or "vendor.". Every
// problem found is reported at once, in a pack_validation_failed *wop.Error
// whose details are {"problems": [Problem...]} and whose message lists
// them one a line. A syntax error is the only problem reported, at its
// pack.json:LINE:COL.
func Parse(data []byte) (*Manifest, error) {
	return parse(data, FileName)
}

// parse is Parse with the file's name as messages should show it.
func parse(data []byte, file string) (*Manifest, error) {
	var ps problems
	if len(data) > MaxSize {
		ps.add("", "is larger than "+strconv.Itoa(MaxSize)+" bytes")
		return nil, ps.err(file)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		// The decoder checks the whole document's syntax first, so a type
		// error means valid JSON that is not an object.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			ps.addAt(data, valueStart(data), "must be a JSON object, not "+jsonValueKind(te.Value))
		} else {
			ps.addAt(data, syntaxOffset(data, err), "is not valid JSON: "+err.Error())
		}
		return nil, ps.err(file)
	}
	if top == nil {
		ps.addAt(data, valueStart(data), "must be a JSON object")
		return nil, ps.err(file)
	}

	var m Manifest
	decodeInto(&ps, "/name", top["name"], &m.Name)
	decodeInto(&ps, "/version", top["version"], &m.Version)
	decodeInto(&ps, "/kind", top["kind"], &m.Kind)
	decodeInto(&ps, "/description", top["description"], &m.Description)
	decodeInto(&ps, "/runtime", top["runtime"], &m.Runtime)
	m.PeerDependencies = decodeMap[string](&ps, "/peerDependencies", top["peerDependencies"])
	m.PeerDependenciesMeta = decodeMap[PeerMeta](&ps, "/peerDependenciesMeta", top["peerDependenciesMeta"])
	m.Nodes = decodeList[Node](&ps, "/nodes", top["nodes"])
	m.Agents = decodeList[json.RawMessage](&ps, "/agents", top["agents"])
	m.Prompts = decodeMap[string](&ps, "/prompts", top["prompts"])
	m.Engines = decodeMap[string](&ps, "/engines", top["engines"])
	for _, k := range sortedKeys(top) {
		if !isTopLevelKey(k) && !vendorHatch.MatchString(k) {
			ps.add(pointer(k), "is not a known field (extensions use an \"x-\" prefix)")
		}
	}

	// Validate even when decoding failed, so that one answer lists every
	// problem; problems under a field that failed to decode are dropped.
	m.validate(&ps)
	if len(ps) > 0 {
		return nil, ps.err(file)
	}
	return &m, nil
}

// decodeInto unmarshals raw into v, recording a problem at field when it
// does not fit. An absent value leaves v untouched.
func decodeInto(ps *problems, field string, raw json.RawMessage, v any) bool {
	if raw == nil {
		return true
	}
	err := json.Unmarshal(raw, v)
	if err == nil {
		return true
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		// Field is a dotted path of struct fields below v, without the
		// indexes; it is still closer to the culprit than field alone.
		if te.Field != "" {
			field += "/" + strings.ReplaceAll(te.Field, ".", "/")
		}
		ps.add(field, "must be "+jsonKind(te.Type)+", not "+te.Value)
		return false
	}
	ps.add(field, err.Error())
	return false
}

// jsonKind names the JSON type that decodes into t.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	default:
		return "a number"
	}
}

// decodeMap decodes an object value by value, so that each bad value is
// reported under its own key.
func decodeMap[T any](ps *problems, field string, raw json.RawMessage) map[string]T {
	var rm map[string]json.RawMessage
	if !decodeInto(ps, field, raw, &rm) || len(rm) == 0 {
		return nil
	}
	out := make(map[string]T, len(rm))
	for _, k := range sortedKeys(rm) {
		var v T
		if decodeInto(ps, field+pointer(k), rm[k], &v) {
			out[k] = v
		}
	}
	return out
}

// decodeList decodes an array element by element, so that each bad element
// is reported under its own index. A bad element stays as a zero value to
// keep the indexes of the others.
func decodeList[T any](ps *problems, field string, raw json.RawMessage) []T {
	var rl []json.RawMessage
	if !decodeInto(ps, field, raw, &rl) || len(rl) == 0 {
		return nil
	}
	out := make([]T, len(rl))
	for i, r := range rl {
		decodeInto(ps, field+pointer(strconv.Itoa(i)), r, &out[i])
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// pointer returns the JSON pointer made of tokens.
func pointer(tokens ...string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}

// problems collects every reason a manifest is refused.
type problems []Problem

// add records a problem unless one was already recorded at field or above
// it, since a value that is wrong as a whole makes its parts' problems
// noise.
func (ps *problems) add(field, message string) {
	for _, p := range *ps {
		if field == p.Field || p.Field == "" || strings.HasPrefix(field, p.Field+"/") {
			return
		}
	}
	*ps = append(*ps, Problem{Field: field, Message: message})
}

// addAt records a problem with the whole document at byte offset off of
// data, which is where an editor should put the cursor.
func (ps *problems) addAt(data []byte, off int, message string) {
	line, col := position(data, off)
	*ps = append(*ps, Problem{Message: message, Line: line, Column: col})
}

// err is the pack_validation_failed error listing ps, nil when there is
// none. file names the manifest in the message. The message puts each
// problem on a line of its own, indented under a header, so that logs and
// terminals show a list rather than one long line; details.problems
// carries the same list structured.
func (ps problems) err(file string) error {
	if len(ps) == 0 {
		return nil
	}
	var msg string
	if len(ps) == 1 && ps[0].Line > 0 {
		// A syntax error stops the decoding, so it is always alone; its
		// file:line:col leads, as editors and terminals expect.
		msg = problemLine(file, ps[0])
	} else {
		noun := "problem"
		if len(ps) > 1 {
			noun = "problems"
		}
		var b strings.Builder
		b.WriteString(file + " is invalid (" + strconv.Itoa(len(ps)) + " " + noun + "):")
		for _, p := range ps {
			b.WriteString("\n  " + problemLine(file, p))
		}
		msg = b.String()
	}
	return wop.Errorf(wop.CodePackValidationFailed, "%s", msg).
		WithDetails(map[string][]Problem{"problems": ps})
}

// problemLine shows one problem on one line: "file:line:col: message" when
// its position is known, otherwise "pointer: message".
func problemLine(file string, p Problem) string {
	msg := strings.Join(strings.Fields(p.Message), " ")
	if p.Line > 0 {
		at := file + ":" + strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Column)
		if p.Field != "" {
			at += ": " + p.Field
		}
		return at + ": " + msg
	}
	return label(p.Field) + ": " + msg
}

// label shows a JSON pointer in a message; the empty pointer would vanish.
func label(p string) string {
	if p == "" {
		return "(document)"
	}
	return p
}

// syntaxOffset is the byte offset in data that err, from decoding data,
// is about. A *json.SyntaxError's Offset counts the bytes read up to and
// including the offending one, or all of them when the input ended early.
func syntaxOffset(data []byte, err error) int {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return 0
	}
	off := int(se.Offset)
	if off >= len(data) {
		return len(data)
	}
	return max(off-1, 0)
}

// jsonValueKind names a JSON kind as the decoder reports it ("array",
// "string", "number", "bool"), with its article.
func jsonValueKind(v string) string {
	switch v {
	case "array", "object":
		return "an " + v
	case "bool":
		return "a boolean"
	case "":
		return "another value"
	}
	return "a " + v
}

// valueStart is the offset of the first byte of data that is not JSON
// whitespace.
func valueStart(data []byte) int {
	for i, c := range data {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return i
		}
	}
	return len(data)
}

// position turns a byte offset of data into a line and a column, both from
// 1; the column counts characters, not bytes, as editors do.
func position(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	return line, 1 + utf8.RuneCount(before[lineStart:])
}
