package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Bound returns a pointer to v, for Attribute.Min and Attribute.Max.
func Bound(v float64) *float64 { return &v }

// Constrained reports whether a narrows its type with any constraint
// field, so that a decoder knows whether CheckValue has work to do.
func (a Attribute) Constrained() bool {
	return a.Whole || a.Min != nil || a.Max != nil || a.Duration || a.MinDuration != "" || a.MaxDuration != "" || len(a.OneOf) > 0
}

// CheckDeclaration reports why a's constraints do not fit its type or each
// other, or nil. The host refuses a plugin whose schema has such an
// attribute, and the SDK's Serve refuses to start with one.
func (a Attribute) CheckDeclaration() error {
	var problems []string
	numeric := a.Whole || a.Min != nil || a.Max != nil
	stringy := a.Duration || a.MinDuration != "" || a.MaxDuration != "" || len(a.OneOf) > 0
	switch {
	case numeric && a.Type != Number:
		problems = append(problems, fmt.Sprintf("whole, min and max apply to %q attributes, not %q", Number, a.Type))
	case stringy && a.Type != String:
		problems = append(problems, fmt.Sprintf("duration, minDuration, maxDuration and oneOf apply to %q attributes, not %q", String, a.Type))
	}
	for _, b := range []*float64{a.Min, a.Max} {
		if b != nil && (math.IsNaN(*b) || math.IsInf(*b, 0)) {
			problems = append(problems, "min and max must be finite numbers")
			break
		}
	}
	if a.Min != nil && a.Max != nil && *a.Min > *a.Max {
		problems = append(problems, fmt.Sprintf("min %v is above max %v", *a.Min, *a.Max))
	}
	if (a.MinDuration != "" || a.MaxDuration != "") && !a.Duration {
		problems = append(problems, "minDuration and maxDuration need duration = true")
	}
	lo, hi, err := a.durationBounds()
	if err != nil {
		problems = append(problems, err.Error())
	} else if a.MinDuration != "" && a.MaxDuration != "" && lo > hi {
		problems = append(problems, fmt.Sprintf("minDuration %s is above maxDuration %s", a.MinDuration, a.MaxDuration))
	}
	seen := map[string]bool{}
	for _, w := range a.OneOf {
		if seen[w] {
			problems = append(problems, fmt.Sprintf("oneOf lists %q twice", w))
		}
		seen[w] = true
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// durationBounds parses MinDuration and MaxDuration. An empty MinDuration
// is the smallest positive duration, so that a duration must be greater
// than zero unless the schema says "0s".
func (a Attribute) durationBounds() (lo, hi time.Duration, err error) {
	lo, hi = time.Nanosecond, time.Duration(math.MaxInt64)
	if a.MinDuration != "" {
		if lo, err = time.ParseDuration(a.MinDuration); err != nil || lo < 0 {
			return 0, 0, fmt.Errorf("minDuration %q is not a duration such as \"1s\"", a.MinDuration)
		}
	}
	if a.MaxDuration != "" {
		if hi, err = time.ParseDuration(a.MaxDuration); err != nil || hi < 0 {
			return 0, 0, fmt.Errorf("maxDuration %q is not a duration such as \"1m\"", a.MaxDuration)
		}
	}
	return lo, hi, nil
}

// CheckValue reports why v, the attribute's value as encoding/json decodes
// it (float64, string, nil for an absent value), is outside a's
// constraints, or nil. An absent value is left to Required. The message
// completes a sentence about the attribute: "must be a whole number from 1
// to 16, got 1.5".
func (a Attribute) CheckValue(v any) error {
	if v == nil || !a.Constrained() {
		return nil
	}
	switch x := v.(type) {
	case float64:
		return a.checkNumber(x)
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return fmt.Errorf("must be a number, got %s", x)
		}
		return a.checkNumber(f)
	case string:
		return a.checkString(x)
	}
	return fmt.Errorf("must be a %s, got %T", a.Type, v)
}

func (a Attribute) checkNumber(x float64) error {
	if !a.Whole && a.Min == nil && a.Max == nil {
		return nil
	}
	ok := !a.Whole || x == math.Trunc(x)
	ok = ok && (a.Min == nil || x >= *a.Min) && (a.Max == nil || x <= *a.Max)
	if ok {
		return nil
	}
	kind := "a number"
	if a.Whole {
		kind = "a whole number"
	}
	switch {
	case a.Min != nil && a.Max != nil:
		return fmt.Errorf("must be %s from %s to %s, got %s", kind, num(*a.Min), num(*a.Max), num(x))
	case a.Min != nil:
		return fmt.Errorf("must be %s of at least %s, got %s", kind, num(*a.Min), num(x))
	case a.Max != nil:
		return fmt.Errorf("must be %s of at most %s, got %s", kind, num(*a.Max), num(x))
	}
	return fmt.Errorf("must be %s, got %s", kind, num(x))
}

func (a Attribute) checkString(x string) error {
	for _, w := range a.OneOf {
		if x == w {
			return nil
		}
	}
	if !a.Duration {
		if len(a.OneOf) == 0 {
			return nil
		}
		return fmt.Errorf("must be one of %s, got %q", quoteList(a.OneOf), x)
	}
	lo, hi, err := a.durationBounds()
	if err != nil {
		return err
	}
	d, perr := time.ParseDuration(x)
	if perr == nil && d >= lo && d <= hi {
		return nil
	}
	want := "a duration such as \"500ms\" or \"1m30s\""
	switch {
	case a.MinDuration != "" && a.MaxDuration != "":
		want += " from " + a.MinDuration + " to " + a.MaxDuration
	case a.MinDuration != "":
		want += " of at least " + a.MinDuration
	case a.MaxDuration != "":
		want += " greater than zero and at most " + a.MaxDuration
	default:
		want += " greater than zero"
	}
	if len(a.OneOf) > 0 {
		want += ", or " + quoteList(a.OneOf)
	}
	return fmt.Errorf("must be %s, got %q", want, x)
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func quoteList(ws []string) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = strconv.Quote(w)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// Violation is one config value outside its attribute's constraints.
type Violation struct {
	// Path names the attribute: block type names, map labels and list
	// indexes, then the attribute's name.
	Path []string
	Err  error
}

// CheckDeclarations reports every attribute of b, nested blocks included,
// whose constraints do not fit (CheckDeclaration), as violations whose
// Path names the attribute in the schema.
func (b Block) CheckDeclarations() []Violation {
	var out []Violation
	b.walkDeclarations(nil, &out)
	return out
}

func (b Block) walkDeclarations(prefix []string, out *[]Violation) {
	for _, a := range b.Attributes {
		if err := a.CheckDeclaration(); err != nil {
			*out = append(*out, Violation{Path: append(append([]string{}, prefix...), a.Name), Err: err})
		}
	}
	for _, nb := range b.Blocks {
		nb.Block.walkDeclarations(append(append([]string{}, prefix...), nb.TypeName), out)
	}
}

// CheckConfig reports every value of config, the JSON the host decodes
// from a config block of shape b, that is outside its attribute's
// constraints. Values of the wrong JSON type are left to the decoder that
// reads config into the plugin's own types.
func (b Block) CheckConfig(config json.RawMessage) []Violation {
	if len(config) == 0 {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(config))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	var out []Violation
	b.walkConfig(nil, v, &out)
	return out
}

func (b Block) walkConfig(prefix []string, v any, out *[]Violation) {
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	at := func(parts ...string) []string { return append(append([]string{}, prefix...), parts...) }
	for _, a := range b.Attributes {
		if err := a.CheckValue(obj[a.Name]); err != nil {
			*out = append(*out, Violation{Path: at(a.Name), Err: err})
		}
	}
	for _, nb := range b.Blocks {
		switch val := obj[nb.TypeName].(type) {
		case map[string]any:
			if nb.Nesting == NestingMap {
				for _, label := range slices.Sorted(maps.Keys(val)) {
					nb.Block.walkConfig(at(nb.TypeName, label), val[label], out)
				}
			} else {
				nb.Block.walkConfig(at(nb.TypeName), val, out)
			}
		case []any:
			for i, e := range val {
				nb.Block.walkConfig(at(nb.TypeName, strconv.Itoa(i)), e, out)
			}
		}
	}
}
