// Package schema describes the shape of a plugin's config block. The plugin
// reports a Block; the host decodes the operator's HCL against it, so every
// diagnostic points at the operator's file, and hands the plugin JSON.
package schema

// Type is an HCL type expression: "string", "number", "bool", "any",
// "list(string)", "map(number)", "object({name=string})" and so on.
type Type string

// Common attribute types.
const (
	String     Type = "string"
	Number     Type = "number"
	Bool       Type = "bool"
	Any        Type = "any"
	ListString Type = "list(string)"
	MapString  Type = "map(string)"
)

// Nesting says how many times a nested block may appear and how the host
// shapes its JSON value.
type Nesting string

const (
	// NestingSingle is at most one block; its value is an object or null.
	NestingSingle Nesting = "single"
	// NestingList is any number of blocks; its value is an array.
	NestingList Nesting = "list"
	// NestingMap is blocks with one label each, unique; its value is an
	// object keyed by label.
	NestingMap Nesting = "map"
)

// Block is a config body: attributes and nested blocks.
type Block struct {
	Attributes []Attribute   `json:"attributes,omitempty"`
	Blocks     []NestedBlock `json:"blocks,omitempty"`
}

// Attribute is one `name = value` in a body.
//
// The constraint fields narrow the values Type admits. The host checks them
// as it decodes the operator's file and reports a value outside them at its
// file:line:col, the same way for every plugin; the SDK checks them again
// before Configure, so a config that reaches a plugin some other way (a
// test) is held to them too. A constraint that does not fit Type makes the
// schema invalid (CheckDeclaration).
type Attribute struct {
	Name        string `json:"name"`
	Type        Type   `json:"type"`
	Required    bool   `json:"required,omitempty"`
	Sensitive   bool   `json:"sensitive,omitempty"`
	Description string `json:"description,omitempty"`

	// Whole requires a Number to be a whole number.
	Whole bool `json:"whole,omitempty"`
	// Min and Max bound a Number, both inclusive.
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
	// Duration requires a String to hold a duration in Go's syntax
	// ("500ms", "1m30s"), greater than zero unless MinDuration allows
	// zero.
	Duration bool `json:"duration,omitempty"`
	// MinDuration and MaxDuration bound a Duration, both inclusive, and
	// are written the same way ("1s"). Either may be empty.
	MinDuration string `json:"minDuration,omitempty"`
	MaxDuration string `json:"maxDuration,omitempty"`
	// OneOf lists the values a String may take. On a Duration it lists
	// the words accepted in place of a duration, such as "forever".
	OneOf []string `json:"oneOf,omitempty"`
}

// NestedBlock is one block type inside a body.
type NestedBlock struct {
	TypeName    string  `json:"typeName"`
	Nesting     Nesting `json:"nesting"`
	Required    bool    `json:"required,omitempty"`
	Description string  `json:"description,omitempty"`
	Block       Block   `json:"block"`
}

// SensitivePaths lists the attribute paths marked sensitive, with "*"
// standing for any list index or map key, e.g. ["provider", "*", "api_key"].
func (b Block) SensitivePaths() [][]string {
	var out [][]string
	b.walkSensitive(nil, &out)
	return out
}

func (b Block) walkSensitive(prefix []string, out *[][]string) {
	for _, a := range b.Attributes {
		if a.Sensitive {
			*out = append(*out, append(append([]string{}, prefix...), a.Name))
		}
	}
	for _, nb := range b.Blocks {
		p := append(append([]string{}, prefix...), nb.TypeName)
		if nb.Nesting != NestingSingle {
			p = append(p, "*")
		}
		nb.Block.walkSensitive(p, out)
	}
}
