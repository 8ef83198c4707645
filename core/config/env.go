package config

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/wophost/wophost/sdk/hostwire"
)

// env decodes a block's env attribute, { NAME = "value", ... }: the
// variables the operator passes to the block's process on top of the base
// set (hostwire.BaseEnv). Each problem is reported at the name or value
// concerned. Values are never put into a diagnostic: they may be secrets
// read with env().
func (d *decoder) env(a *hcl.Attribute) map[string]string {
	if a == nil {
		return nil
	}
	pairs, diags := hcl.ExprMap(a.Expr)
	if diags.HasErrors() {
		d.errorf(a.Expr.Range(), "Invalid env",
			`env must be an object of variable names and values, such as env = { HTTPS_PROXY = "http://proxy:3128", API_KEY = env("API_KEY") }.`)
		return nil
	}
	out := make(map[string]string, len(pairs))
	seen := make(map[string]hcl.Range, len(pairs))
	for _, kv := range pairs {
		name, ok := d.envName(kv.Key)
		if !ok {
			continue
		}
		keyRange := kv.Key.Range()
		if prev, dup := seen[name]; dup {
			d.errorf(keyRange, "Duplicate env variable",
				"%s is set at %s and again here; set each variable once.", name, posString(prev))
			continue
		}
		seen[name] = keyRange
		value, ok := d.envValue(name, kv.Value)
		if !ok {
			continue
		}
		out[name] = value
	}
	return out
}

// envName evaluates one key of env and checks it names a variable the
// operator may set.
func (d *decoder) envName(expr hcl.Expression) (string, bool) {
	rng := expr.Range()
	v, diags := expr.Value(d.ectx)
	d.diags = append(d.diags, diags...)
	if diags.HasErrors() {
		return "", false
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		d.errorf(rng, "Invalid env variable name", "A variable name must be a string.")
		return "", false
	}
	name := v.AsString()
	switch {
	case !isEnvName(name):
		d.errorf(rng, "Invalid env variable name",
			"%q is not a variable name: use letters, digits and underscores, not starting with a digit.", name)
		return "", false
	case hostwire.IsReservedEnv(name):
		d.errorf(rng, "Reserved env variable",
			"%s is reserved: the host sets the WOPHOST_ and PLUGIN_ variables of every process itself, for the plugin protocol.", name)
		return "", false
	}
	return name, true
}

// envValue evaluates the value of variable name. Strings, numbers and
// booleans are accepted, as their string form.
func (d *decoder) envValue(name string, expr hcl.Expression) (string, bool) {
	rng := expr.Range()
	v, diags := expr.Value(d.ectx)
	d.diags = append(d.diags, diags...)
	if diags.HasErrors() {
		return "", false
	}
	if v.IsNull() {
		d.errorf(rng, "Invalid env value", "The value of %s is null; remove the variable or give it a value.", name)
		return "", false
	}
	s, err := convert.Convert(v, cty.String)
	if err != nil || !s.IsKnown() {
		d.errorf(rng, "Invalid env value", "The value of %s must be a string, a number or a bool; got %s.", name, v.Type().FriendlyName())
		return "", false
	}
	value := s.AsString()
	if strings.IndexByte(value, 0) >= 0 {
		// No value in the message: it may be a secret.
		d.errorf(rng, "Invalid env value", "The value of %s contains a NUL byte, which no environment variable can hold.", name)
		return "", false
	}
	return value, true
}

// isEnvName reports whether s is a portable environment variable name:
// letters, digits and underscores, not starting with a digit.
func isEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
