// Package registry tracks every declared capability through its lifecycle
// and derives the advertisement: exactly the families whose plugins are
// ready, with the facets those plugins report.
package registry

// State is a lifecycle state of a declared capability.
type State string

// The lifecycle of a declared capability. Only StateReady is advertised.
// StateWaiting is a capability whose plugin runs but refused its
// configuration for a reason that may pass by itself (its database is out
// of reach): the host configures it again with backoff until it is ready.
const (
	StateDeclared   State = "declared"
	StateVerified   State = "verified"
	StateStarted    State = "started"
	StateNegotiated State = "negotiated"
	StateDescribed  State = "described"
	StateConfigured State = "configured"
	StateReady      State = "ready"
	StateFailed     State = "failed"
	StateCrashed    State = "crashed"
	StateRestarting State = "restarting"
	StateStopped    State = "stopped"
	StateWaiting    State = "waiting"
)
