package local

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strings"
)

// maxDepth bounds recursion through nested and $ref'd schemas, so a
// cyclic schema fails cleanly instead of exhausting the stack.
const maxDepth = 32

// Instance builds a deterministic value meant to validate against schema
// (a decoded JSON Schema). It prefers what the schema itself offers
// (const, enum, default, examples), then builds the smallest value of the
// first type that satisfies the bounds it understands. Keywords it does
// not understand (pattern, not, dependencies) may make the value invalid;
// the caller validates the result anyway.
func Instance(schema any) (any, error) {
	g := &gen{root: schema}
	return g.value(schema, 0)
}

type gen struct{ root any }

func (g *gen) value(s any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("schema nests deeper than %d levels (a $ref cycle?)", maxDepth)
	}
	switch v := s.(type) {
	case nil:
		return map[string]any{}, nil
	case bool:
		if !v {
			return nil, fmt.Errorf("the schema false admits no value")
		}
		return map[string]any{}, nil
	case map[string]any:
		return g.object(v, depth)
	}
	return nil, fmt.Errorf("a schema must be an object or a boolean, not %T", s)
}

func (g *gen) object(s map[string]any, depth int) (any, error) {
	if ref, ok := s["$ref"].(string); ok {
		target, err := g.resolve(ref)
		if err != nil {
			return nil, err
		}
		return g.value(target, depth+1)
	}
	if c, ok := s["const"]; ok {
		return c, nil
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0], nil
	}
	if d, ok := s["default"]; ok {
		return d, nil
	}
	if ex, ok := s["examples"].([]any); ok && len(ex) > 0 {
		return ex[0], nil
	}
	if all, ok := s["allOf"].([]any); ok && len(all) > 0 {
		return g.allOf(s, all, depth)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			return g.value(alts[0], depth+1)
		}
	}
	switch typeOf(s) {
	case "null":
		return nil, nil
	case "boolean":
		return false, nil
	case "integer":
		return integer(s), nil
	case "number":
		return number(s), nil
	case "string":
		return str(s), nil
	case "array":
		return g.array(s, depth)
	}
	return g.obj(s, depth)
}

// allOf merges the object instances of each branch, which covers the
// common use (object fragments composed); for scalars the first wins.
func (g *gen) allOf(s map[string]any, all []any, depth int) (any, error) {
	rest := map[string]any{}
	for k, v := range s {
		if k != "allOf" {
			rest[k] = v
		}
	}
	parts := append([]any{rest}, all...)
	merged := map[string]any{}
	var scalar any
	for _, p := range parts {
		pm, ok := p.(map[string]any)
		if ok && len(pm) == 0 {
			continue
		}
		v, err := g.value(p, depth+1)
		if err != nil {
			return nil, err
		}
		if m, ok := v.(map[string]any); ok {
			for k, x := range m {
				merged[k] = x
			}
		} else if scalar == nil {
			scalar = v
		}
	}
	if scalar != nil && len(merged) == 0 {
		return scalar, nil
	}
	return merged, nil
}

func typeOf(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		// Prefer a non-null type: null is rarely what a caller wants.
		for _, x := range t {
			if ts, ok := x.(string); ok && ts != "null" {
				return ts
			}
		}
		if len(t) > 0 {
			if ts, ok := t[0].(string); ok {
				return ts
			}
		}
	}
	switch {
	case s["properties"] != nil || s["required"] != nil:
		return "object"
	case s["items"] != nil || s["prefixItems"] != nil:
		return "array"
	}
	return "object"
}

func (g *gen) obj(s map[string]any, depth int) (any, error) {
	out := map[string]any{}
	props, _ := s["properties"].(map[string]any)
	req, _ := s["required"].([]any)
	for _, r := range req {
		name, ok := r.(string)
		if !ok {
			continue
		}
		ps, ok := props[name]
		if !ok {
			ps = map[string]any{}
			if ap, ok := s["additionalProperties"].(map[string]any); ok {
				ps = ap
			}
		}
		v, err := g.value(ps, depth+1)
		if err != nil {
			return nil, fmt.Errorf("property %q: %w", name, err)
		}
		out[name] = v
	}
	// minProperties beyond required: add declared properties in a stable
	// (sorted) order until satisfied.
	if minP := intKeyword(s, "minProperties", 0); len(out) < minP {
		for _, name := range sortedKeys(props) {
			if len(out) >= minP {
				break
			}
			if _, done := out[name]; done {
				continue
			}
			v, err := g.value(props[name], depth+1)
			if err != nil {
				return nil, fmt.Errorf("property %q: %w", name, err)
			}
			out[name] = v
		}
	}
	return out, nil
}

func (g *gen) array(s map[string]any, depth int) (any, error) {
	n := intKeyword(s, "minItems", 0)
	out := []any{}
	prefix, _ := s["prefixItems"].([]any)
	for i := 0; i < n; i++ {
		var item any = s["items"]
		if i < len(prefix) {
			item = prefix[i]
		}
		v, err := g.value(item, depth+1)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func str(s map[string]any) string {
	var base string
	switch s["format"] {
	case "date-time":
		base = "1970-01-01T00:00:00Z"
	case "date":
		base = "1970-01-01"
	case "time":
		base = "00:00:00Z"
	case "email":
		base = "local@example.invalid"
	case "uri", "url", "iri":
		base = "https://example.invalid/"
	case "uuid":
		base = "00000000-0000-4000-8000-000000000000"
	case "ipv4":
		base = "192.0.2.1"
	case "ipv6":
		base = "2001:db8::1"
	case "hostname":
		base = "example.invalid"
	}
	if minL := intKeyword(s, "minLength", 0); len([]rune(base)) < minL {
		base += strings.Repeat("x", minL-len([]rune(base)))
	}
	return base
}

func integer(s map[string]any) any {
	lo, hasLo := bound(s, "minimum", "exclusiveMinimum", true)
	hi, hasHi := bound(s, "maximum", "exclusiveMaximum", false)
	v := 0.0
	switch {
	case hasLo && v < lo:
		v = math.Ceil(lo)
	case hasHi && v > hi:
		v = math.Floor(hi)
	}
	if m, ok := s["multipleOf"].(float64); ok && m > 0 {
		v = math.Ceil(v/m) * m
	}
	return int64(v)
}

func number(s map[string]any) any {
	lo, hasLo := bound(s, "minimum", "exclusiveMinimum", true)
	hi, hasHi := bound(s, "maximum", "exclusiveMaximum", false)
	v := 0.0
	switch {
	case hasLo && v < lo:
		v = lo
	case hasHi && v > hi:
		v = hi
	}
	if m, ok := s["multipleOf"].(float64); ok && m > 0 {
		v = math.Ceil(v/m) * m
	}
	return v
}

// bound reads an inclusive bound, or the exclusive one nudged inward by
// one (for integers exact; for numbers a valid if coarse choice).
func bound(s map[string]any, incl, excl string, lower bool) (float64, bool) {
	if v, ok := s[incl].(float64); ok {
		return v, true
	}
	if v, ok := s[excl].(float64); ok {
		if lower {
			return v + 1, true
		}
		return v - 1, true
	}
	return 0, false
}

func intKeyword(s map[string]any, k string, def int) int {
	if v, ok := s[k].(float64); ok && v >= 0 && v <= 1000 {
		return int(v)
	}
	return def
}

func sortedKeys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}

// resolve follows a local JSON pointer reference ("#/$defs/x"). Remote
// references are refused: the local provider reads no network.
func (g *gen) resolve(ref string) (any, error) {
	if !strings.HasPrefix(ref, "#") {
		return nil, fmt.Errorf("$ref %q: only local references (#/...) are supported", ref)
	}
	frag, err := url.PathUnescape(strings.TrimPrefix(ref, "#"))
	if err != nil {
		return nil, fmt.Errorf("$ref %q: %w", ref, err)
	}
	cur := g.root
	if frag == "" {
		return cur, nil
	}
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
	}
	return cur, nil
}
