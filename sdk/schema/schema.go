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
type Attribute struct {
	Name        string `json:"name"`
	Type        Type   `json:"type"`
	Required    bool   `json:"required,omitempty"`
	Sensitive   bool   `json:"sensitive,omitempty"`
	Description string `json:"description,omitempty"`
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
