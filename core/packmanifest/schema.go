package packmanifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/wophost/wophost/internal/rooted"
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

// schemaBase is the synthetic location schema files are registered under.
// The .invalid TLD guarantees it never resolves to anything real.
const schemaBase = "https://pack.invalid"

// refuseLoader stops a schema from reaching files or the network through
// $ref or $schema: a pack is untrusted, and the library's default loader
// reads any local file.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema references outside the schema are not supported: %s", url)
}

// LoadSchemas reads and compiles the schema files the nodes reference
// (configSchemaRef, inputSchemaRef, outputSchemaRef), each a path inside
// dir, the pack directory: a path that leads outside it, through ".." or
// a symbolic link, is refused, and so is a missing file or one that is not
// a JSON Schema (2020-12 unless it says otherwise; no $ref outside the
// file). Each file is compiled once, however many nodes name it. Problems
// are reported like Parse's, in a pack_validation_failed *wop.Error.
//
// When pack.json lists the pack's file digests (FilesKey, as a signed
// pack.json does), each schema file must be listed and its bytes, as read
// for compiling, must have the listed digest: a file changed after its
// signature was checked is refused, not compiled.
func (m *Manifest) LoadSchemas(dir string) error {
	return m.loadSchemas(dir, filepath.Join(dir, FileName))
}

func (m *Manifest) loadSchemas(dir, file string) error {
	var ps problems
	compiled := map[string]*jsonschema.Schema{}
	failed := map[string]string{}
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
				ps.add(field, msg)
				continue
			}
			sch, ok := compiled[key]
			if !ok {
				var msg string
				sch, msg = compileFile(dir, *ref.path, m.Files)
				if msg != "" {
					failed[key] = msg
					ps.add(field, msg)
					continue
				}
				compiled[key] = sch
			}
			*targets[j] = sch
		}
	}
	return ps.err(file)
}

// compileFile reads and compiles the schema at rel inside dir, or explains
// why it cannot. With pins (a FilesKey map), the bytes read must have the
// digest pins lists for rel.
func compileFile(dir, rel string, pins map[string]string) (*jsonschema.Schema, string) {
	q := strconv.Quote(rel)
	if msg := checkEntry(rel); msg != "" {
		return nil, msg
	}
	f, err := rooted.OpenFile(dir, rel, os.O_RDONLY)
	if err != nil {
		var out *rooted.OutsideError
		switch {
		case errors.As(err, &out):
			return nil, q + " leads outside the pack directory through a symbolic link; put the schema file inside the pack"
		case errors.Is(err, fs.ErrNotExist):
			return nil, q + " does not exist in the pack directory " + dir
		}
		return nil, "cannot open " + q + ": " + err.Error()
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, q + " is not a regular file"
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, "cannot read " + q + ": " + err.Error()
	}
	if len(data) > MaxSize {
		return nil, q + " is larger than " + strconv.Itoa(MaxSize) + " bytes"
	}
	if pins != nil {
		key := path.Clean(filepath.ToSlash(rel))
		sum := sha256.Sum256(data)
		switch want, ok := pins[key]; {
		case !ok:
			return nil, q + " is not among the files " + FilesKey + " lists"
		case hex.EncodeToString(sum[:]) != want:
			return nil, q + " is not the file " + FilesKey + " lists: its sha256 is " + hex.EncodeToString(sum[:]) + ", not " + want
		}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, q + " is not valid JSON: " + err.Error()
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, q + " must hold a JSON object, a JSON Schema"
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	url := schemaBase + "/" + path.Clean(filepath.ToSlash(rel))
	if err := c.AddResource(url, doc); err != nil {
		return nil, q + " cannot be registered as a schema: " + err.Error()
	}
	sch, err := c.Compile(url)
	if err == nil {
		return sch, ""
	}
	// A schema that breaks the metaschema is reported at each offending
	// keyword, which is where its author has to look.
	var sve *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &verr) {
		var parts []string
		for _, v := range violations(verr) {
			parts = append(parts, label(v.Pointer)+" "+v.Message)
		}
		return nil, q + " is not valid JSON Schema: " + strings.Join(parts, "; ")
	}
	return nil, q + " does not compile as JSON Schema: " + err.Error()
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
			out = append(out, Violation{Pointer: at, Message: k.LocalizedString(p)})
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
