package wop

// FacetRule says that a call of one method of a family needs one of the
// family's facets beside the family itself: always, or, when When names
// a member, only when the request's top-level boolean member of that
// name is true. The rules of a core family are fixed by the contract and
// kept in its package under sdk/families; a vendor family declares its
// own in its plugin's Describe. The host holds every call to them, on
// the routed path and on a direct channel alike (sdk/admission).
type FacetRule struct {
	// Method is a method of the family, or "*" for every method.
	Method string `json:"method"`
	// Facet is the facet the call needs.
	Facet string `json:"facet"`
	// When, if set, is the top-level boolean member of the request that
	// asks for the facet ("async").
	When string `json:"when,omitempty"`
}

// EveryMethod is the FacetRule.Method that stands for every method of
// the family.
const EveryMethod = "*"
