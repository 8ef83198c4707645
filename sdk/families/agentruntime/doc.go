// Package agentruntime holds the request and result types of the
// agentRuntime host-services family (docs/contract.md §4.3) and a Client that calls
// it through a wop.Caller. Both pack code and agent runtime plugins use
// these types, so the JSON field names are the contract's.
//
// Advertising agentRuntime implies the agents family with its
// manifestRuntime facet: the host loads, lists and dispatches the agent
// manifests of installed packs. The manifest type lives here too:
// ParseManifest validates one manifest (every problem named by its JSON
// pointer), ParsePackAgents validates a pack's agents[] list as a whole,
// Manifest.Digest identifies a manifest by the sha256 of its canonical
// JSON, and ParsePromptPin and ParseToolRef read its systemPromptRef and
// toolAllowlist entries.
//
// The zero *Client is usable: every method then reports
// capability_not_provided.
package agentruntime
