// Package wire is the go-plugin glue shared by the host and the SDKs: the
// handshake, the plugin set, the conversion of errors and call contexts to
// and from the generated protocol types, and the brokered HostServices
// connection. Vendors use sdk/plugin and sdk/pack instead.
package wire
