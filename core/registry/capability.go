package registry

import (
	"strings"

	"github.com/wophost/wophost/sdk/wop"
)

// SplitCapability splits "family.facet" into its parts. A core family name
// never contains a dot, so a vendor family "org.name" followed by a facet is
// "org.name.facet" only when known is given the set of families; without
// it, dotted vendor names are returned whole.
func SplitCapability(s string, known func(string) bool) (family, facet string) {
	if known != nil && known(s) {
		return s, ""
	}
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return s, ""
	}
	if wop.IsCoreFamily(s[:i]) || (known != nil && known(s[:i])) {
		return s[:i], s[i+1:]
	}
	return s, ""
}
