// Package direct is the direct channel: a plugin's own endpoint on which
// a pack calls it without the host relaying the call, and on which the
// host sends the calls it does relay to that plugin.
//
// The host stays the authority. At node dispatch it offers the pack one
// channel per plugin serving families the node declared, each with a
// grant: the run, the node, the families and facets it may call, the
// deadline, the depth and the size limit, under an HMAC-SHA256 with a key
// only the host and that plugin process hold. The plugin checks the grant
// and the call against it on every call, as the host's router checks a
// relayed call, and keeps the run's calls for the host's invocation log
// until the host ends the run (EndRun), after which the grant is refused.
// A call the host relays (Relay) carries a MAC of the same key instead of
// a grant, and runs as Invoke would run it.
//
// The wire is not gRPC but frames on one TLS connection (see frame.go),
// so that a call crosses one goroutine hand-off on each side. A grant the
// plugin refuses (a key it no longer holds, an ended run) is answered with
// a refusal frame, which no call outcome uses; the pack's SDK then sends
// the call through the host instead, so a revoked channel gets exactly the
// answer the routed path gives.
package direct
