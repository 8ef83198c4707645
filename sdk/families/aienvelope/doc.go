// Package aienvelope holds the request and result types of the aiEnvelope
// host-services family (docs/contract.md §4.1) and a Client that calls it through
// a wop.Caller. Both pack code and provider plugins use these types, so
// the JSON field names are the contract's and must not change.
//
// The zero *Client is usable: every method then reports
// capability_not_provided, so pack code never dereferences an absent
// family.
package aienvelope
