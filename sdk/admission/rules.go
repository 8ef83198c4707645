package admission

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wophost/wophost/sdk/wop"
)

// CheckFacetRules returns an error naming the rule when the facet rules
// a family declares cannot be held: a core family declares none (the
// contract fixes its rules), and each rule names one of methods (or
// wop.EveryMethod) and a facet, a plain name without a dot. The host
// refuses such a record at Describe, and the plugin SDK at Serve.
func CheckFacetRules(family string, methods []string, rules []wop.FacetRule) error {
	if len(rules) > 0 && wop.IsCoreFamily(family) {
		return fmt.Errorf("the facet rule for method %q: the contract fixes the facet rules of a core family, which declares none", rules[0].Method)
	}
	for i, r := range rules {
		switch {
		case r.Method != wop.EveryMethod && !slices.Contains(methods, r.Method):
			return fmt.Errorf("facet rule %d: method %q is not one of its methods (%s) nor %q", i, r.Method, strings.Join(methods, ", "), wop.EveryMethod)
		case r.Facet == "" || strings.ContainsAny(r.Facet, ". "):
			return fmt.Errorf("facet rule %d (method %q): facet %q must be a name without dots or spaces", i, r.Method, r.Facet)
		case r.When != "" && strings.TrimSpace(r.When) != r.When:
			return fmt.Errorf("facet rule %d (method %q): member %q has surrounding spaces", i, r.Method, r.When)
		}
	}
	return nil
}
