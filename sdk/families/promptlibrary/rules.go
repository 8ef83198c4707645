//go:build !wasip1

// Left out of wasip1 builds: these are the host's and plugins' checks,
// and a WebAssembly pack's family client depends on sdk/wop alone.

package promptlibrary

import "github.com/wophost/wophost/sdk/admission"

// Rules are what the contract asks of a call of this family beyond the
// family itself: the methods that manage the store are the operator's
// alone (docs/contract.md §4.2); packs and agents read pinned prompts
// through get and never change them. The family has no facet.
func Rules() admission.Rules {
	return admission.Rules{OperatorOnly: []string{MethodPublish, MethodList, MethodVersions, MethodResolve, MethodVerify, MethodReindex}}
}
