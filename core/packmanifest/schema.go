package packmanifest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/wophost/wophost/sdk/wop"
)

// Violation is one way a value fails a node's schema, as listed in the
// details of a validation_error.
type Violation struct {
	// Pointer is the JSON pointer of the failing value ("" for the whole
	// value); for a missing property, where it should be.
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

// schemaBase is the synthetic location schema files are compiled under,
// one URL per file (fileURL), so that the compiler resolves a relative
// reference between them as between files. The .invalid TLD guarantees it
// never resolves to anything real, and messages show pack paths instead.
const schemaBase = "https://" + schemaHost

// LoadSchemas reads and compiles the schema files the nodes reference
// (configSchemaRef, inputSchemaRef, outputSchemaRef), each a path inside
// dir, the pack directory: a path that leads outside it, through ".." or
// a symbolic link, is refused, and so is a missing file or one that is not
// a JSON Schema (2020-12 unless it says otherwise). A schema may $ref
// another file of the pack by a path relative to its own file
// ("common.json#/$defs/key", "./defs/x.json"), read through dir as the
// nodes' files are; a reference that leaves dir, an absolute path and a
// URL (http, https, file or any other) are refused, each named by its file
// and JSON pointer, all of them in one error. The files the references
// reach are bounded (MaxSchemaFiles, MaxSchemaBytes), and a reference
// cycle is compiled as the schema it describes. Each file is compiled
// once, however many nodes name it. Problems are reported like Parse's,
// in a pack_validation_failed *wop.Error.
//
// When pack.json lists the pack's file digests (FilesKey, as a signed
// pack.json does), each schema file, referenced ones included, must be
// listed and its bytes, as read for compiling, must have the listed
// digest: a file changed after its signature was checked is refused, not
// compiled.
func (m *Manifest) LoadSchemas(dir string) error {
	return m.loadSchemas(dir, filepath.Join(dir, FileName))
}

func (m *Manifest) loadSchemas(dir, file string) error {
	var ps problems
	set := newSchemaSet(dir, m.Files)
	compiled := map[string]*jsonschema.Schema{}
	failed := map[string]string{}
	// The nodes' own files are read first, so that the bound on the files
	// the references reach falls on a referenced file, not on a node's.
	for i := range m.Nodes {
		for _, ref := range m.Nodes[i].refs() {
			if *ref.path != "" && checkEntry(*ref.path) == "" {
				set.read(path.Clean(filepath.ToSlash(*ref.path)))
			}
		}
	}
	for i := range m.Nodes {
		n := &m.Nodes[i]
		targets := []**jsonschema.Schema{&n.config, &n.input, &n.output}
		for j, ref := range n.refs() {
			if *ref.path == "" {
				continue
			}
			field := "/nodes" + pointer(strconv.Itoa(i)) + "/" + ref.key
			key := path.Clean(filepath.ToSlash(*ref.path))
			if msg, bad := failed[key]; bad {
				if msg != "" {
					ps.add(field, msg)
				}
				continue
			}
			sch, ok := compiled[key]
			if !ok {
				var msg string
				sch, msg = set.node(key, *ref.path, &ps)
				if sch == nil {
					failed[key] = msg
					if msg != "" {
						ps.add(field, msg)
					}
					continue
				}
				compiled[key] = sch
			}
			*targets[j] = sch
		}
	}
	return ps.err(file)
}

// node reads, walks and compiles the schema file key that a node names as
// named, or explains why it cannot: a problem of the file itself is
// returned, for the node's field; one of the files it references is
// recorded in ps, at that file (both nil and "").
func (s *schemaSet) node(key, named string, ps *problems) (*jsonschema.Schema, string) {
	if msg := checkEntry(named); msg != "" {
		return nil, msg
	}
	f := s.read(key)
	if msg := cmp.Or(f.unreachable, f.bad); msg != "" {
		return nil, strconv.Quote(named) + " " + msg
	}
	if !s.walk(key, ps) {
		return nil, ""
	}
	return s.compile(key, named, ps)
}

// ValidateInput checks input against the node's input schema. Input that
// is not JSON, or fails the schema, is a validation_error *wop.Error whose
// details are {"errors": [Violation...]}, one per failing value. Without an
// inputSchemaRef any JSON value passes.
func (n *Node) ValidateInput(input json.RawMessage) error {
	return n.check("input", "inputSchemaRef", n.InputSchemaRef, n.input, input)
}

// ValidateOutput is ValidateInput for the node's result and output schema.
func (n *Node) ValidateOutput(output json.RawMessage) error {
	return n.check("output", "outputSchemaRef", n.OutputSchemaRef, n.output, output)
}

func (n *Node) check(what, refField, ref string, sch *jsonschema.Schema, value json.RawMessage) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return invalid(n.TypeID, what, []Violation{{Pointer: "", Message: "is not valid JSON: " + err.Error()}})
	}
	if sch == nil {
		if ref != "" {
			// A manifest parsed without its directory: refusing beats
			// skipping the check.
			return wop.Errorf(wop.CodeInternal, "the %s of %s was never loaded; load the pack's schemas first", refField, n.TypeID)
		}
		return nil
	}
	err = sch.Validate(doc)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return invalid(n.TypeID, what, []Violation{{Pointer: "", Message: err.Error()}})
	}
	return invalid(n.TypeID, what, violations(verr))
}

func invalid(typeID, what string, vs []Violation) error {
	parts := make([]string, len(vs))
	for i, v := range vs {
		p := v.Pointer
		if p == "" {
			p = "(" + what + ")"
		}
		parts[i] = p + ": " + v.Message
	}
	return wop.Errorf(wop.CodeValidation, "%s of %s is invalid: %s", what, typeID, strings.Join(parts, "; ")).
		WithDetails(map[string][]Violation{"errors": vs})
}

// violations flattens a validation error to its leaves, the failures a
// person can act on; the inner nodes only say "allOf failed" and the like.
// The result is sorted so that the same input always reads the same.
func violations(verr *jsonschema.ValidationError) []Violation {
	p := message.NewPrinter(language.English)
	var out []Violation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		at := pointer(e.InstanceLocation...)
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, name := range k.Missing {
				out = append(out, Violation{Pointer: at + pointer(name), Message: "is required"})
			}
		case *kind.AdditionalProperties:
			for _, name := range k.Properties {
				out = append(out, Violation{Pointer: at + pointer(name), Message: "is not allowed"})
			}
		default:
			// packRelative: a reference cycle is reported by the
			// compiler's URL of the file.
			out = append(out, Violation{Pointer: at, Message: packRelative(k.LocalizedString(p))})
		}
	}
	walk(verr)
	slices.SortFunc(out, func(a, b Violation) int {
		if c := strings.Compare(a.Pointer, b.Pointer); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return slices.Compact(out)
}
