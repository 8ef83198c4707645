// Package wire is the go-plugin glue of the wophost plugin protocol: the
// handshake, the plugin set, the conversion of errors and call contexts to
// and from the generated protocol types, the launch's mutual TLS, the
// brokered HostServices connection and the caller a plugin or pack reaches
// it with. Every definition of the protocol's Go side lives here.
//
// It is internal: sdk/plugin and sdk/pack serve vendors' binaries with it,
// and sdk/plugintest starts them. A host, which lives in another module,
// reaches the part it needs through sdk/hostwire.
package wire
