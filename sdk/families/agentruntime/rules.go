//go:build !wasip1

// Left out of wasip1 builds: these are the host's and plugins' checks,
// and a WebAssembly pack's family client depends on sdk/wop alone.

package agentruntime

import "github.com/wophost/wophost/sdk/admission"

// Rules are what the contract asks of a call of this family beyond the
// family itself: instances is the operator's alone (docs/contract.md
// §4.3), so that no pack, plugin or agent learns which agents run; the
// family has no facet. The host's agent checks (who may act for which
// agent) apply on top, on the routed path every call to the family takes.
func Rules() admission.Rules {
	return admission.Rules{OperatorOnly: []string{MethodInstances}}
}
