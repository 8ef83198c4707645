// Package packmanifest parses and validates a node pack's pack.json, written
// in OpenWOP v2's published manifest format, and derives from it what the
// host checks at load and at dispatch: the pack's peer requirements, each
// node's requirements, what a node may call, whether an input matches the
// node's input schema, and which OpenWOP features of the pack this host
// does not implement.
//
// Reading a pack takes two steps: Parse checks the document alone (an
// embedded copy has no directory), and LoadSchemas reads and compiles the
// schema files the nodes reference, inside the pack directory. Load does
// both for a pack directory.
package packmanifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/wophost/wophost/sdk/wop"
)

// FileName is the name of the manifest file in a pack directory.
const FileName = "pack.json"

// MaxSize is the largest manifest, and the largest schema file, accepted,
// in bytes.
const MaxSize = 4 << 20

// Peer dependency values.
const (
	Required = "required"
	Optional = "optional"
)

// This host's own keys, under OpenWOP's vendor hatch ("x-"): other hosts
// ignore them, as OpenWOP requires of unknown hatch keys.
const (
	// RequiresKey is the node key listing the families and facets the
	// node needs beyond its pack's peer dependencies.
	RequiresKey = "x-wophost-requires"
	// PromptsKey is the root key holding the prompt lock map: bare prompt
	// name to pinned reference.
	PromptsKey = "x-wophost-prompts"
	// EntrySHA256Key is the root key holding the lowercase hex SHA-256 of
	// runtime.entry. A signature over pack.json covers it, and so the
	// binary too; the host checks it on the opened binary before starting
	// the process. It sits at the root because the runtime block is closed
	// to extension keys.
	EntrySHA256Key = "x-wophost-entry-sha256"
	// FilesKey is the root key mapping the path, relative and
	// slash-separated, of every other file of the pack to its lowercase
	// hex SHA-256, as signing writes it. A signature over pack.json covers
	// it, and so every file of the pack; the host checks a schema file's
	// digest on the bytes it compiles.
	FilesKey = "x-wophost-files"
)

// Manifest is a parsed pack.json. After Parse, legacy v1 peer dependency
// spellings have been rewritten to their v2 form, and Notes lists the
// OpenWOP features the pack uses that this host reads without acting on.
type Manifest struct {
	Name                 string              `json:"name"`
	Version              string              `json:"version"`
	Kind                 string              `json:"kind"`
	Description          string              `json:"description,omitempty"`
	Author               string              `json:"author,omitempty"`
	License              string              `json:"license,omitempty"`
	Homepage             string              `json:"homepage,omitempty"`
	Repository           string              `json:"repository,omitempty"`
	Keywords             []string            `json:"keywords,omitempty"`
	Engines              Engines             `json:"engines"`
	Dependencies         map[string]string   `json:"dependencies,omitempty"`
	PeerDependencies     map[string]string   `json:"peerDependencies,omitempty"`
	PeerDependenciesMeta map[string]PeerMeta `json:"peerDependenciesMeta,omitempty"`
	Nodes                []Node              `json:"nodes,omitempty"`
	// Agents are agent manifests, kept raw for the agent runtime to check.
	Agents  []json.RawMessage `json:"agents,omitempty"`
	Runtime Runtime           `json:"runtime"`
	Signing *Signing          `json:"signing,omitempty"`
	// Connector is OpenWOP's connector block, checked and kept raw: this
	// host does not act on it.
	Connector json.RawMessage `json:"connector,omitempty"`
	// Prompts is the prompt lock map (PromptsKey).
	Prompts map[string]string `json:"x-wophost-prompts,omitempty"`
	// EntrySHA256 is the entry binary's digest (EntrySHA256Key), or "".
	EntrySHA256 string `json:"x-wophost-entry-sha256,omitempty"`
	// Files is the file digest map (FilesKey): nil when pack.json has no
	// such key, which is not the same as an empty map.
	Files map[string]string `json:"x-wophost-files,omitempty"`

	// Notes are the OpenWOP features of the pack that this host reads
	// but does not act on, for the operator to see.
	Notes []Note `json:"-"`
}

// Engines names the protocol versions the pack works with.
type Engines struct {
	// OpenWOP is a range: a ">=" lower bound and a "<N.0.0" ceiling.
	OpenWOP string `json:"openwop"`
}

// Runtime says how to start the pack.
type Runtime struct {
	Language string `json:"language"`
	// Entry is the executable, relative to the pack directory.
	Entry             string   `json:"entry"`
	Format            string   `json:"format,omitempty"`
	MinRuntimeVersion string   `json:"minRuntimeVersion,omitempty"`
	Requires          []string `json:"requires,omitempty"`
	// MCPServer is the server record of a remote pack, which this host
	// refuses.
	MCPServer json.RawMessage `json:"mcpServer,omitempty"`
}

// LanguageWasm is runtime.language of a WebAssembly pack: its entry is a
// module the host runs in process (OpenWOP RFC 0008), not an executable.
// The module's openwop_abi_version export says its ABI: OpenWOP v2's
// manifest has no runtime.wasm block.
const LanguageWasm = "wasm"

// IsWasm reports whether the pack is a WebAssembly pack.
func (m *Manifest) IsWasm() bool { return m.Runtime.Language == LanguageWasm }

// Signing names the key a published pack is signed with.
type Signing struct {
	KeyID  string `json:"keyId"`
	Scheme string `json:"scheme"`
}

// PeerMeta refines one peer dependency.
type PeerMeta struct {
	Facets   []string `json:"facets,omitempty"`
	Optional bool     `json:"optional,omitempty"`
}

// RoleSideEffect is the node role of OpenWOP that marks a node as acting
// on the world itself: a replay answers such a node from its record
// instead of running its code (docs/replay.md).
const RoleSideEffect = "side-effect"

// Node is one node type of the pack.
type Node struct {
	TypeID       string   `json:"typeId"`
	Version      string   `json:"version"`
	Label        string   `json:"label,omitempty"`
	Description  string   `json:"description,omitempty"`
	Category     string   `json:"category"`
	Role         string   `json:"role"`
	Capabilities []string `json:"capabilities,omitempty"`
	// The schema references are paths inside the pack directory, read by
	// LoadSchemas.
	ConfigSchemaRef     string                `json:"configSchemaRef,omitempty"`
	InputSchemaRef      string                `json:"inputSchemaRef,omitempty"`
	OutputSchemaRef     string                `json:"outputSchemaRef,omitempty"`
	Outputs             map[string]OutputPort `json:"outputs,omitempty"`
	EnvelopeContractRef string                `json:"envelopeContractRef,omitempty"`
	// The blocks this host checks but does not act on stay raw.
	Artifact                  json.RawMessage   `json:"artifact,omitempty"`
	MCP                       json.RawMessage   `json:"mcp,omitempty"`
	RequiresSecrets           []json.RawMessage `json:"requiresSecrets,omitempty"`
	RequiredCredentials       []json.RawMessage `json:"requiredCredentials,omitempty"`
	Auth                      json.RawMessage   `json:"auth,omitempty"`
	RequiredModelCapabilities []string          `json:"requiredModelCapabilities,omitempty"`
	FallbackModel             json.RawMessage   `json:"fallbackModel,omitempty"`
	// Requires lists the families and facets the node needs beyond the
	// pack's peer dependencies (RequiresKey).
	Requires []string `json:"x-wophost-requires,omitempty"`

	// Compiled by LoadSchemas so that dispatch never recompiles.
	config, input, output *jsonschema.Schema
}

// OutputPort is what OpenWOP says of one output port.
type OutputPort struct {
	Sensitive bool `json:"sensitive,omitempty"`
}

// Note is an OpenWOP feature of a pack that this host reads without acting
// on, so that the operator is told rather than left to assume it works.
type Note struct {
	// Field is the JSON pointer of the value.
	Field   string `json:"field"`
	Message string `json:"message"`
}

// String shows the note on one line.
func (n Note) String() string { return n.Field + ": " + n.Message }

// Problem is one reason a manifest is refused, as listed in the details of
// the refusal.
type Problem struct {
	// File is the pack file the problem is in, relative to the pack
	// directory and slash-separated, when it is not pack.json: a schema
	// file that a reference reaches.
	File string `json:"file,omitempty"`
	// Field is the JSON pointer of the offending value ("" for the whole
	// document) in pack.json, or in File when File is set.
	Field   string `json:"field"`
	Message string `json:"message"`
	// Code is the OpenWOP error code of this problem when it has one of
	// its own (pack_kind_invalid, pack_engine_unsupported,
	// pack_peer_dependency_undefined, oauth_provider_unsupported); empty
	// means pack_validation_failed.
	Code string `json:"code,omitempty"`
	// DidYouMean is the known name closest to a misspelt one, when one
	// is close.
	DidYouMean string `json:"didYouMean,omitempty"`
	// Line and Column locate the problem in the file, both from 1 (the
	// column counts characters), when the JSON decoder said where it
	// stopped: a syntax error, or a document that is not an object. They
	// are 0 otherwise; Field then says where to look.
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
}

// Load reads and parses dir/pack.json and loads the schema files its nodes
// reference, returning the manifest and the raw bytes (which a pack
// binary's embedded copy is compared against). Read failures of pack.json
// are the *os.PathError values, which name the file; a refused manifest is
// a *wop.Error (see Parse for its code) whose message starts with the
// file's path.
func Load(dir string) (*Manifest, []byte, error) {
	m, data, err := Read(dir)
	if err != nil {
		return nil, nil, err
	}
	if err := m.loadSchemas(dir, filepath.Join(dir, FileName)); err != nil {
		return nil, nil, err
	}
	return m, data, nil
}

// Read is Load without the schema files, for a caller that checks the
// pack's signature before it reads anything else of the pack, then calls
// LoadSchemas.
func Read(dir string) (*Manifest, []byte, error) {
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

// Parse decodes and validates a manifest written to OpenWOP v2's format.
// Unknown keys are refused unless they start with "x-", "openwop-" or
// "vendor.", which are ignored, except this host's own RequiresKey and
// PromptsKey. The schema references are checked as paths but not read:
// LoadSchemas does that.
//
// Every problem found is reported at once, in a *wop.Error whose details
// are {"problems": [Problem...]} and whose message lists them one a line.
// Its code is pack_kind_invalid, pack_engine_unsupported,
// pack_peer_dependency_undefined or oauth_provider_unsupported when a
// problem carries that code (in this order), pack_validation_failed
// otherwise. A syntax error is the only
// problem reported, at its pack.json:LINE:COL.
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
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		ps.add("", "is not valid JSON: "+err.Error())
		return nil, ps.err(file)
	}

	// The format's rules first, so that their messages win over the
	// checks below at the same field.
	manifestShape.check(&ps, "", doc)

	// Decoding is lenient: a value of the wrong type was reported above
	// and stays zero, and the checks below still run, so that one answer
	// lists every problem.
	var m Manifest
	decodeKnown(top, &m)
	if nodes, ok := top["nodes"]; ok {
		var raw []json.RawMessage
		if json.Unmarshal(nodes, &raw) == nil {
			m.Nodes = make([]Node, len(raw))
			for i, r := range raw {
				var fields map[string]json.RawMessage
				if json.Unmarshal(r, &fields) == nil {
					decodeKnown(fields, &m.Nodes[i])
				}
			}
		}
	}

	m.validate(&ps)
	if len(ps) > 0 {
		return nil, ps.err(file)
	}
	return &m, nil
}

// decodeKnown decodes into v, a pointer to a struct, the values of fields
// whose keys are exactly the JSON names of v's fields. Exactly: the
// standard decoder also matches keys that differ in case, and an extension
// key such as "x-WOPHOST-requires" is someone else's, to be ignored. A
// value that does not decode stays zero; nodes are decoded by the caller.
func decodeKnown(fields map[string]json.RawMessage, v any) {
	rv := reflect.ValueOf(v).Elem()
	rt := rv.Type()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		raw, ok := fields[name]
		if name == "" || name == "-" || name == "nodes" || !ok {
			continue
		}
		f := rv.Field(i)
		if err := json.Unmarshal(raw, f.Addr().Interface()); err != nil {
			f.SetZero()
		}
	}
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

// add records a problem (of pack_validation_failed) unless one was already recorded at field or above
// it, since a value that is wrong as a whole makes its parts' problems
// noise.
func (ps *problems) add(field, message string) {
	ps.addCode(field, "", message)
}

// addCode is add for a problem with an error code of its own.
func (ps *problems) addCode(field, code, message string) {
	ps.addProblem(Problem{Field: field, Message: message, Code: code})
}

// addProblem is add for a problem built whole.
func (ps *problems) addProblem(p Problem) {
	for _, q := range *ps {
		if p.File != q.File {
			continue
		}
		if p.Field == q.Field || q.Field == "" || strings.HasPrefix(p.Field, q.Field+"/") {
			return
		}
	}
	*ps = append(*ps, p)
}

// has reports whether a problem was recorded at field or below it: a
// value already refused for its shape is not refused again for what it
// means.
func (ps problems) has(field string) bool {
	for _, p := range ps {
		if p.File == "" && (p.Field == field || strings.HasPrefix(p.Field, field+"/")) {
			return true
		}
	}
	return false
}

// addAt records a problem with the whole document at byte offset off of
// data, which is where an editor should put the cursor.
func (ps *problems) addAt(data []byte, off int, message string) {
	line, col := position(data, off)
	*ps = append(*ps, Problem{Message: message, Line: line, Column: col})
}

// err is the error listing ps, nil when there is none: its code is the
// first of codePriority that a problem carries, else
// pack_validation_failed. file names the manifest in the message. The message puts each
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
	code := wop.CodePackValidationFailed
	for _, c := range codePriority {
		if slices.ContainsFunc(ps, func(p Problem) bool { return p.Code == c }) {
			code = c
			break
		}
	}
	return wop.Errorf(code, "%s", msg).
		WithDetails(map[string][]Problem{"problems": ps})
}

// problemLine shows one problem on one line: "file:line:col: message" when
// its position is known, "schema-file: pointer: message" for a problem in
// another file of the pack, otherwise "pointer: message".
func problemLine(file string, p Problem) string {
	msg := strings.Join(strings.Fields(p.Message), " ")
	if p.File != "" {
		return p.File + ": " + label(p.Field) + ": " + msg
	}
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
