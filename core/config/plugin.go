package config

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/wophost/wophost/sdk/schema"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// DecodePluginConfig decodes c.Config against the schema the plugin
// reported and returns it as plain JSON: objects, arrays, strings, numbers,
// bools, and null for absent optional attributes and blocks. ectx is
// normally Loader.EvalContext(cfg.Dir). Every problem is returned, each with
// a source range; the JSON is nil when there are errors.
func DecodePluginConfig(c *Capability, s schema.Block, ectx *hcl.EvalContext) (json.RawMessage, hcl.Diagnostics) {
	spec, problems := specForBlock(s, "")
	if len(problems) > 0 {
		diags := make(hcl.Diagnostics, 0, len(problems))
		for _, p := range problems {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid plugin schema",
				Detail: fmt.Sprintf("The plugin for capability %q (%s) reported an invalid config schema: %s. This is a bug in the plugin, not in the config file.",
					c.Name, c.Plugin, p),
				Subject: c.ConfigRange.Ptr(),
			})
		}
		return nil, diags
	}

	body := c.Config
	if body == nil {
		body = hcl.EmptyBody()
	}
	val, diags := hcldec.Decode(body, spec, ectx)
	for _, d := range diags {
		// An absent config block is an empty body whose ranges point
		// nowhere ("<empty>"), so anchor those at the capability instead.
		if d.Subject == nil || d.Subject.Filename == "" || d.Subject.Filename == "<empty>" {
			d.Subject = c.ConfigRange.Ptr()
		}
	}
	sortDiagnostics(diags)
	if diags.HasErrors() {
		return nil, diags
	}

	if !val.IsWhollyKnown() {
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Incomplete plugin config",
			Detail:   fmt.Sprintf("The config of capability %q has values that are not known at load time.", c.Name),
			Subject:  c.ConfigRange.Ptr(),
		})
	}
	out, err := ctyjson.Marshal(val, val.Type())
	if err != nil {
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Cannot encode plugin config",
			Detail:   fmt.Sprintf("Encoding the config of capability %q as JSON: %s.", c.Name, err),
			Subject:  c.ConfigRange.Ptr(),
		})
	}
	return out, diags
}

// specForBlock turns a schema body into an hcldec spec. Problems are
// collected rather than returned one by one so a plugin author sees every
// mistake in the schema at once. prefix is the dotted path for messages.
func specForBlock(b schema.Block, prefix string) (hcldec.ObjectSpec, []string) {
	spec := make(hcldec.ObjectSpec, len(b.Attributes)+len(b.Blocks))
	var problems []string
	seen := make(map[string]bool, len(b.Attributes)+len(b.Blocks))
	declared := func(name string) bool {
		where := prefix + name
		switch {
		case !hclsyntax.ValidIdentifier(name):
			problems = append(problems, fmt.Sprintf("%q is not a valid name", where))
			return false
		case seen[name]:
			problems = append(problems, fmt.Sprintf("%q is declared more than once", where))
			return false
		}
		seen[name] = true
		return true
	}

	for _, a := range b.Attributes {
		if !declared(a.Name) {
			continue
		}
		ty, err := parseType(a.Type)
		if err != nil {
			problems = append(problems, fmt.Sprintf("attribute %q: %s", prefix+a.Name, err))
			continue
		}
		if err := a.CheckDeclaration(); err != nil {
			problems = append(problems, fmt.Sprintf("attribute %q: %s", prefix+a.Name, err))
			continue
		}
		var s hcldec.Spec = &hcldec.AttrSpec{Name: a.Name, Type: ty, Required: a.Required}
		if a.Constrained() {
			s = constrainedSpec(a, s)
		}
		spec[a.Name] = s
	}

	for _, nb := range b.Blocks {
		if !declared(nb.TypeName) {
			continue
		}
		nested, nestedProblems := specForBlock(nb.Block, prefix+nb.TypeName+".")
		problems = append(problems, nestedProblems...)
		// hcldec's list and map specs need every element to have the same
		// type, which "any" attributes cannot promise; the tuple and object
		// variants accept differing element types.
		dynamic := hcldec.ImpliedType(nested).HasDynamicTypes()
		minItems := 0
		if nb.Required {
			minItems = 1
		}
		switch nb.Nesting {
		case schema.NestingSingle:
			spec[nb.TypeName] = &hcldec.BlockSpec{TypeName: nb.TypeName, Nested: nested, Required: nb.Required}
		case schema.NestingList:
			if dynamic {
				spec[nb.TypeName] = &hcldec.BlockTupleSpec{TypeName: nb.TypeName, Nested: nested, MinItems: minItems}
			} else {
				spec[nb.TypeName] = &hcldec.BlockListSpec{TypeName: nb.TypeName, Nested: nested, MinItems: minItems}
			}
		case schema.NestingMap:
			var m hcldec.Spec
			labels := []string{"name"}
			if dynamic {
				m = &hcldec.BlockObjectSpec{TypeName: nb.TypeName, LabelNames: labels, Nested: nested}
			} else {
				m = &hcldec.BlockMapSpec{TypeName: nb.TypeName, LabelNames: labels, Nested: nested}
			}
			if nb.Required {
				m = requireOneBlock(nb.TypeName, m)
			}
			spec[nb.TypeName] = m
		default:
			problems = append(problems, fmt.Sprintf("block %q has unknown nesting %q (want %s, %s or %s)",
				prefix+nb.TypeName, nb.Nesting, schema.NestingSingle, schema.NestingList, schema.NestingMap))
		}
	}
	return spec, problems
}

// constrainedSpec wraps an attribute's spec with its schema constraints,
// so that a value outside them is reported at the value itself, with the
// same words for every plugin.
func constrainedSpec(a schema.Attribute, s hcldec.Spec) hcldec.Spec {
	return &hcldec.ValidateSpec{
		Wrapped: s,
		Func: func(v cty.Value) hcl.Diagnostics {
			if !v.IsKnown() || v.IsNull() {
				return nil
			}
			var plain any
			switch v.Type() {
			case cty.Number:
				f, _ := v.AsBigFloat().Float64()
				plain = f
			case cty.String:
				plain = v.AsString()
			default:
				return nil
			}
			if err := a.CheckValue(plain); err != nil {
				// Subject is filled in by hcldec with the value's range.
				return hcl.Diagnostics{{
					Severity: hcl.DiagError,
					Summary:  fmt.Sprintf("Invalid value for %q", a.Name),
					Detail:   fmt.Sprintf("%s %s.", a.Name, err),
				}}
			}
			return nil
		},
	}
}

// requireOneBlock wraps a map-nested block spec, which has no MinItems of
// its own, so a required map block must appear at least once.
func requireOneBlock(typeName string, s hcldec.Spec) hcldec.Spec {
	return &hcldec.ValidateSpec{
		Wrapped: s,
		Func: func(v cty.Value) hcl.Diagnostics {
			if !v.IsKnown() || v.IsNull() || v.LengthInt() > 0 {
				return nil
			}
			// Subject is filled in by hcldec with where the block is missing.
			return hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  fmt.Sprintf("Missing %s block", typeName),
				Detail:   fmt.Sprintf("At least one %q block is required here.", typeName),
			}}
		},
	}
}

// parseType parses an HCL type expression such as "list(string)".
func parseType(t schema.Type) (cty.Type, error) {
	expr, diags := hclsyntax.ParseExpression([]byte(t), "<plugin schema>", hcl.InitialPos)
	if !diags.HasErrors() {
		var ty cty.Type
		ty, diags = typeexpr.TypeConstraint(expr)
		if !diags.HasErrors() {
			return ty, nil
		}
	}
	msgs := make([]string, 0, len(diags))
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			msgs = append(msgs, strings.TrimSuffix(d.Summary+": "+d.Detail, "."))
		}
	}
	return cty.NilType, fmt.Errorf("invalid type expression %q: %s", string(t), strings.Join(msgs, "; "))
}
