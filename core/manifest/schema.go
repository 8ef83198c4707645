package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// schemaBase is the synthetic location node schemas are registered under.
// The .invalid TLD guarantees it never resolves to anything real.
const schemaBase = "https://pack.invalid"

// refuseLoader stops a schema from reaching files or the network through
// $ref or $schema: pack.json is untrusted, and the library's default loader
// reads local files.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema references outside the schema are not supported: %s", url)
}

// hasSchema reports whether raw holds a schema; null counts as none.
func hasSchema(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null"))
}

// compileSchema compiles the schema at field, recording each problem. It
// returns the raw schema to keep (nil when absent) and the compiled one.
func compileSchema(ps *problems, field string, raw json.RawMessage) (json.RawMessage, *jsonschema.Schema) {
	if !hasSchema(raw) {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		ps.add(field, "is not valid JSON: "+err.Error())
		return raw, nil
	}
	if _, ok := doc.(map[string]any); !ok {
		ps.add(field, "must be a JSON object")
		return raw, nil
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	url := schemaBase + field + ".json"
	if err := c.AddResource(url, doc); err != nil {
		ps.add(field, "cannot be registered: "+err.Error())
		return raw, nil
	}
	sch, err := c.Compile(url)
	if err == nil {
		return raw, sch
	}
	// A schema that breaks the metaschema is reported at each offending
	// keyword, which is where its author has to look.
	var sve *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &verr) {
		// Alternatives of the metaschema (anyOf) fail at one keyword
		// together; problems allows one entry per field, so join them.
		vs := violations(verr)
		for i := 0; i < len(vs); {
			j := i + 1
			msgs := []string{vs[i].Message}
			for ; j < len(vs) && vs[j].Pointer == vs[i].Pointer; j++ {
				msgs = append(msgs, vs[j].Message)
			}
			ps.add(field+vs[i].Pointer, "is not valid JSON Schema: "+strings.Join(msgs, ", or "))
			i = j
		}
		return raw, nil
	}
	ps.add(field, "does not compile as JSON Schema: "+err.Error())
	return raw, nil
}

// ValidateInput checks input against the node's inputSchema. Input that is
// not JSON, or fails the schema, is a validation_error *wop.Error whose
// details are {"errors": [Violation...]}, one per failing value. Without an
// inputSchema any JSON value passes.
func (n *Node) ValidateInput(input json.RawMessage) error {
	return n.check("input", "inputSchema", n.InputSchema, n.input, input)
}

// ValidateOutput is ValidateInput for the node's result and outputSchema.
func (n *Node) ValidateOutput(output json.RawMessage) error {
	return n.check("output", "outputSchema", n.OutputSchema, n.output, output)
}

func (n *Node) check(what, schemaField string, raw json.RawMessage, sch *jsonschema.Schema, value json.RawMessage) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return invalid(n.TypeID, what, []Violation{{Pointer: "", Message: "is not valid JSON: " + err.Error()}})
	}
	if sch == nil {
		if hasSchema(raw) {
			// A Node built in code whose manifest never went through
			// Validate: refusing beats skipping the check.
			return wop.Errorf(wop.CodeInternal, "the %s of %s was never compiled; validate the manifest first", schemaField, n.TypeID)
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
