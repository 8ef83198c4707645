// Package hostwire is the host's side of the wophost plugin protocol, for
// hosts and conformance tools; a plugin or pack author never imports it
// (sdk/plugin, sdk/pack and sdk/families are theirs).
//
// It is public because the host lives in another module than the SDK and
// cannot import the SDK's internal packages, where the protocol is
// defined (sdk/internal/wire); this package names the part a host needs
// and defines nothing of its own:
//
//   - the handshake a binary must answer: Handshake, ProtocolVersion, and
//     the kinds of the plugin set, KindCapability and KindPack;
//   - the launch of a plugin or pack process: ProcessEnv, its base set of
//     the host's environment (BaseEnv, IsBaseEnv), the names an operator
//     may not pass (IsReservedEnv), ClientConfig with the launch's mutual
//     TLS, and EnvTLSFD, the variable naming the key material's
//     descriptor (the project's MCP plugin, which starts MCP servers as
//     the host starts plugins, keeps them to BaseEnv the same way);
//   - why a process went away before it was ready, in its own words:
//     LastWords keeps the end of its stderr, StartFailure and
//     ExitedDuring make an ExitError (or a HandshakeError) of go-plugin's
//     failure or a lost connection, StatusOf says how it ended;
//   - the connections go-plugin dispenses, CapabilityConn and PackConn,
//     what a capability plugin says of itself (Description,
//     DescriptionFromProto), and ServeHostServices, which serves the
//     host's services to a process over the broker;
//   - what crosses the wire with every call: the error envelope (ToStatus,
//     FromStatus) and the call context (CallContextToProto,
//     CallContextFromProto).
//
// The serving side (the go-plugin servers of plugins and packs, their TLS,
// the caller of the host's services) is sdk/plugin's and sdk/pack's, and
// stays internal.
package hostwire
