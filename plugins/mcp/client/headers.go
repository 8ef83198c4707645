package client

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"
)

// ParamHeader is one x-mcp-header annotation of a tool's input schema.
type ParamHeader struct {
	// Name is the annotation value; the header is Mcp-Param-<Name>.
	Name string
	// Path is the chain of property names from the root of the arguments.
	Path []string
	// Type is the JSON Schema type of the property: string, integer or
	// boolean.
	Type string
}

// ToolHeaders reads the x-mcp-header annotations of one tool's
// inputSchema. It fails when an annotation is invalid under the
// 2026-07-28 rules: empty or not an RFC 9110 token, duplicated
// (case-insensitively), on a property that is not a string, integer or
// boolean, or reached through anything but a chain of properties.
func ToolHeaders(inputSchema json.RawMessage) ([]ParamHeader, error) {
	if len(inputSchema) == 0 {
		return nil, nil
	}
	var root any
	dec := json.NewDecoder(bytes.NewReader(inputSchema))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("inputSchema: %w", err)
	}
	var out []ParamHeader
	seen := map[string]bool{}
	var walk func(v any, path []string, chain bool) error
	walk = func(v any, path []string, chain bool) error {
		switch s := v.(type) {
		case []any:
			for _, e := range s {
				if err := walk(e, path, false); err != nil {
					return err
				}
			}
		case map[string]any:
			if raw, ok := s["x-mcp-header"]; ok {
				if !chain || len(path) == 0 {
					return fmt.Errorf("x-mcp-header at %s is not on a property reached through properties only", pointer(path))
				}
				name, ok := raw.(string)
				if !ok || !isToken(name) {
					return fmt.Errorf("x-mcp-header at %s is not a valid header name token", pointer(path))
				}
				if seen[strings.ToLower(name)] {
					return fmt.Errorf("x-mcp-header %q is used twice", name)
				}
				seen[strings.ToLower(name)] = true
				typ, _ := s["type"].(string)
				if typ != "string" && typ != "integer" && typ != "boolean" {
					return fmt.Errorf("x-mcp-header %q is on a property of type %v; want string, integer or boolean", name, s["type"])
				}
				out = append(out, ParamHeader{Name: name, Path: append([]string(nil), path...), Type: typ})
			}
			keys := make([]string, 0, len(s))
			for k := range s {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				switch k {
				case "properties":
					props, ok := s[k].(map[string]any)
					if !ok {
						continue
					}
					names := make([]string, 0, len(props))
					for n := range props {
						names = append(names, n)
					}
					sort.Strings(names)
					for _, n := range names {
						if err := walk(props[n], append(append([]string(nil), path...), n), chain); err != nil {
							return err
						}
					}
				case "default", "const", "enum", "examples", "x-mcp-header":
					// values, not schemas
				default:
					if err := walk(s[k], path, false); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := walk(root, nil, true); err != nil {
		return nil, err
	}
	return out, nil
}

func pointer(path []string) string {
	if len(path) == 0 {
		return "the schema root"
	}
	return "/" + strings.Join(path, "/")
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// maxSafeInteger bounds integers sent in headers (±(2^53−1)).
var maxSafeInteger = big.NewInt(1<<53 - 1)

// paramHeaderValues computes the Mcp-Param-* headers for one call. A value
// that is absent, null, of the wrong type or not encodable yields no
// header.
func paramHeaderValues(specs []ParamHeader, arguments json.RawMessage) []header {
	if len(specs) == 0 || len(arguments) == 0 {
		return nil
	}
	var args any
	dec := json.NewDecoder(bytes.NewReader(arguments))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		return nil
	}
	var out []header
	for _, spec := range specs {
		v := args
		for _, p := range spec.Path {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[p]
		}
		value, err := headerText(spec.Type, v)
		if err != nil {
			continue
		}
		out = append(out, header{Name: "Mcp-Param-" + spec.Name, Value: value})
	}
	return out
}

func headerText(typ string, v any) (string, error) {
	switch typ {
	case "string":
		s, ok := v.(string)
		if !ok {
			return "", errors.New("not a string")
		}
		return encodeHeaderValue(s), nil
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return "", errors.New("not a number")
		}
		i, ok := new(big.Int).SetString(n.String(), 10)
		if !ok || i.CmpAbs(maxSafeInteger) > 0 {
			return "", errors.New("not a safe integer")
		}
		return i.String(), nil
	case "boolean":
		b, ok := v.(bool)
		if !ok {
			return "", errors.New("not a boolean")
		}
		if b {
			return "true", nil
		}
		return "false", nil
	}
	return "", errors.New("unsupported type")
}

// encodeHeaderValue applies the 2026-07-28 header encoding: printable
// ASCII with inner spaces goes as is; anything else (non-ASCII, control
// characters, leading or trailing whitespace, or text that looks like the
// encoded form) is sent as =?base64?…?= of its UTF-8 bytes.
func encodeHeaderValue(s string) string {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			plain = false
			break
		}
	}
	if plain && len(s) > 0 && (s[0] == ' ' || s[len(s)-1] == ' ') {
		plain = false
	}
	if plain && strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?=") {
		plain = false
	}
	if plain {
		return s
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
}
