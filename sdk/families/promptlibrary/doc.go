// Package promptlibrary holds the request and result types of the
// promptLibrary host-services family (docs/contract.md §4.2) and a Client that
// calls it through a wop.Caller. Both pack code and prompt store plugins
// use these types, so the JSON field names are the contract's.
//
// Get returns a pinned version verbatim or fails; there is no fallback to
// another version. The management methods (publish, list, versions,
// resolve, verify, reindex; Manager) are the operator's: the host refuses
// them to packs, plugins and agents. The zero *Client is usable: every method then reports
// capability_not_provided.
package promptlibrary
