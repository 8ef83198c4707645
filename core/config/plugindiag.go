package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// PluginDiagnostic is a problem a plugin found in its decoded config.
type PluginDiagnostic struct {
	Summary string
	Detail  string
	// Path locates the offending value: attribute names, block type names,
	// map labels, and list indexes as decimal strings.
	Path []string
}

// PluginDiagnostics turns a plugin's own config errors into error
// diagnostics pointing into c.Config. When a path cannot be followed to the
// end, the diagnostic points at the nearest enclosing construct found (or
// c.ConfigRange) and its detail names the full path.
func PluginDiagnostics(c *Capability, diags []PluginDiagnostic) hcl.Diagnostics {
	return pluginDiagnostics(c, diags, hcl.DiagError)
}

// PluginWarnings is PluginDiagnostics for the warnings a plugin reports
// about a config it serves with.
func PluginWarnings(c *Capability, diags []PluginDiagnostic) hcl.Diagnostics {
	return pluginDiagnostics(c, diags, hcl.DiagWarning)
}

func pluginDiagnostics(c *Capability, diags []PluginDiagnostic, severity hcl.DiagnosticSeverity) hcl.Diagnostics {
	out := make(hcl.Diagnostics, 0, len(diags))
	for _, pd := range diags {
		rng, exact := locate(c.Config, pd.Path, c.ConfigRange)
		detail := pd.Detail
		if !exact && len(pd.Path) > 0 {
			detail = strings.TrimSpace(fmt.Sprintf("%s (config path: %s)", detail, strings.Join(pd.Path, ".")))
		}
		out = append(out, &hcl.Diagnostic{
			Severity: severity,
			Summary:  pd.Summary,
			Detail:   detail,
			Subject:  rng.Ptr(),
		})
	}
	return out
}

// locate follows path through body and reports the range reached and
// whether the whole path was consumed.
func locate(body hcl.Body, path []string, fallback hcl.Range) (hcl.Range, bool) {
	rng := fallback
	for i := 0; i < len(path); {
		if body == nil {
			return rng, false
		}
		name := path[i]
		attr, blocks := lookup(body, name, path[i+1:])
		if attr != nil {
			return locateInExpr(attr.Expr, path[i+1:])
		}
		if len(blocks) == 0 {
			return rng, false
		}
		i++
		blk, consumed := pickBlock(blocks, path[i:])
		if blk == nil {
			// The block type exists but not the requested instance; its
			// first occurrence is the closest thing to point at.
			return blocks[0].DefRange, false
		}
		i += consumed
		rng = blk.DefRange
		body = blk.Body
	}
	return rng, true
}

// lookup finds an attribute or the blocks named name in body. Native syntax
// bodies are read directly, which sees labelled and unlabelled blocks alike;
// other bodies (JSON) go through PartialContent, guessing a label when the
// path continues.
func lookup(body hcl.Body, name string, rest []string) (*hcl.Attribute, []*hcl.Block) {
	if sb, ok := body.(*hclsyntax.Body); ok {
		if a, ok := sb.Attributes[name]; ok {
			return a.AsHCLAttribute(), nil
		}
		var blocks []*hcl.Block
		for _, b := range sb.Blocks {
			if b.Type == name {
				blocks = append(blocks, b.AsHCLBlock())
			}
		}
		return nil, blocks
	}

	content, _, _ := body.PartialContent(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: name}}})
	if content != nil && content.Attributes[name] != nil {
		return content.Attributes[name], nil
	}
	if len(rest) > 0 {
		content, _, _ = body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: name, LabelNames: []string{"name"}}}})
		if content != nil {
			for _, b := range content.Blocks {
				if b.Labels[0] == rest[0] {
					return nil, content.Blocks
				}
			}
		}
	}
	content, _, _ = body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: name}}})
	if content == nil {
		return nil, nil
	}
	return nil, content.Blocks
}

// pickBlock chooses among blocks of one type using the next path element:
// a label for map nesting, an index for list nesting, or nothing for single
// nesting. It returns how many path elements it used.
func pickBlock(blocks []*hcl.Block, rest []string) (*hcl.Block, int) {
	labelled := false
	for _, b := range blocks {
		if len(b.Labels) > 0 {
			labelled = true
			if len(rest) > 0 && b.Labels[0] == rest[0] {
				return b, 1
			}
		}
	}
	if labelled {
		return nil, 0
	}
	if len(rest) > 0 {
		// Attribute names are identifiers, never decimal, so a number
		// here can only be a list index.
		if idx, err := strconv.Atoi(rest[0]); err == nil {
			if idx >= 0 && idx < len(blocks) {
				return blocks[idx], 1
			}
			return nil, 0
		}
	}
	return blocks[0], 0
}

// locateInExpr follows the remaining path into object and tuple
// constructors, for map, object and list attributes.
func locateInExpr(expr hcl.Expression, rest []string) (hcl.Range, bool) {
	rng := expr.Range()
	for _, key := range rest {
		if pairs, diags := hcl.ExprMap(expr); !diags.HasErrors() {
			var next hcl.Expression
			for _, kv := range pairs {
				k, kdiags := kv.Key.Value(nil)
				if kdiags.HasErrors() || !k.IsKnown() || k.IsNull() || k.Type() != cty.String {
					continue
				}
				if k.AsString() == key {
					next = kv.Value
					break
				}
			}
			if next == nil {
				return rng, false
			}
			expr, rng = next, next.Range()
			continue
		}
		if elems, diags := hcl.ExprList(expr); !diags.HasErrors() {
			idx, err := strconv.Atoi(key)
			if err != nil || idx < 0 || idx >= len(elems) {
				return rng, false
			}
			expr, rng = elems[idx], elems[idx].Range()
			continue
		}
		return rng, false
	}
	return rng, true
}
