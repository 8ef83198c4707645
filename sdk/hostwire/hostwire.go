package hostwire

import (
	"os"
	"os/exec"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/internal/direct"
	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// ProtocolVersion is the major version of the wophost plugin protocol.
const ProtocolVersion = wire.ProtocolVersion

// Plugin kinds in the plugin set, the names the host dispenses. A binary
// serves one of them.
const (
	KindCapability = wire.KindCapability
	KindPack       = wire.KindPack
)

// EnvTLSFD names the inherited file descriptor on which the host hands a
// plugin or pack the key material of its connection.
const EnvTLSFD = wire.EnvTLSFD

// EnvSandbox is the variable the host sets, only for a process it runs
// contained, to the requirement tokens the sandbox grants, comma-separated
// ("" for none). The pack SDK reads its presence to report a refused
// operation as sandbox_capability_denied.
const EnvSandbox = wire.EnvSandbox

// Handshake is the go-plugin handshake every wophost binary shares. The
// cookie only guards against running a plugin by hand; it is not security.
var Handshake = wire.Handshake

// HealthService is the service name a plugin's health check answers
// for (grpc.health.v1).
const HealthService = wire.HealthService

// CapabilityConn is the host's connection to one capability plugin, what
// dispensing KindCapability returns.
type CapabilityConn = wire.CapabilityConn

// PackConn is the host's connection to one pack process, what dispensing
// KindPack returns.
type PackConn = wire.PackConn

// Description is what a plugin says about itself in Describe.
type Description = wire.Description

// FamilyDescription is one family a plugin says it can serve.
type FamilyDescription = wire.FamilyDescription

// DescriptionFromProto converts a Describe answer into plain Go.
func DescriptionFromProto(resp *wophostv1.DescribeResponse) *Description {
	return wire.DescriptionFromProto(resp)
}

// ProcessEnv is the environment a plugin or pack process starts with: the
// base set of the host's own (BaseEnv), plus the settings the SDKs read at
// start-up (log level, message size limit, plugin name). ClientConfig adds
// the TLS descriptor and go-plugin its handshake variables.
func ProcessEnv(name string, level hclog.Level, maxBytes int) []string {
	return wire.ProcessEnv(name, level, maxBytes)
}

// BaseEnv returns the entries of environ ("NAME=value") that every process
// the host starts may see: PATH, HOME, TMPDIR, TZ and the locale (LANG,
// LANGUAGE, LC_*). The order of environ is kept.
func BaseEnv(environ []string) []string { return wire.BaseEnv(environ) }

// IsBaseEnv reports whether the variable name belongs to the base set
// BaseEnv keeps.
func IsBaseEnv(name string) bool { return wire.IsBaseEnv(name) }

// IsReservedEnv reports whether the variable name is one the host sets
// itself for the plugin protocol (WOPHOST_*, go-plugin's PLUGIN_*), which
// an operator may therefore not pass.
func IsReservedEnv(name string) bool { return wire.IsReservedEnv(name) }

// ClientConfig is the go-plugin client configuration every wophost process
// is started with: gRPC only, the launch's mutual TLS attached to cmd, the
// shared handshake and plugin set, and the message size limit on the
// dialling side. Callers add what is theirs (a checksum pin, log sinks),
// and call started once the client has started the process or failed to.
func ClientConfig(cmd *exec.Cmd, logger hclog.Logger, startTimeout time.Duration, maxBytes int) (cfg *goplugin.ClientConfig, started func(), err error) {
	return wire.ClientConfig(cmd, logger, startTimeout, maxBytes)
}

// LastWords keeps the end of what a process wrote to stderr, bounded, for
// saying why it went away in its own words: the start of a Go panic, or
// its last lines, on one line.
type LastWords = wire.LastWords

// ExitError is a process that exited before it was ready: before its
// handshake, or during a call made before it serves. Its text is the
// process's own last words on stderr when it wrote any.
type ExitError = wire.ExitError

// HandshakeError is a process whose first line on stdout is not the
// go-plugin handshake.
type HandshakeError = wire.HandshakeError

// StartFailure is the error of a process go-plugin failed to start with
// err, given how the process ended (nil when not known) and what it wrote
// last to stderr: an *ExitError or a *HandshakeError in place of
// go-plugin's guesses, or err with said after it.
func StartFailure(err error, state *os.ProcessState, said string) error {
	return wire.StartFailure(err, state, said)
}

// ExitedDuring is the error of the call named call, made to a process
// before it serves, that failed with err: an *ExitError when the
// connection failed because the process exited (exited, the connection's
// Exited context, closes within a bound), otherwise FromStatus(err). cmd
// is the process's command, words what it wrote last to stderr.
func ExitedDuring(call string, err error, exited <-chan struct{}, cmd *exec.Cmd, words *LastWords) error {
	return wire.ExitedDuring(call, err, exited, cmd, words)
}

// StatusOf is how a process ended, as os/exec says it ("exit status 3"),
// "" for nil.
func StatusOf(state *os.ProcessState) string { return wire.StatusOf(state) }

// ServeHostServices serves impl on a new broker id and returns the id to
// pass to the other side. The listener lives as long as the broker.
func ServeHostServices(broker *goplugin.GRPCBroker, impl wophostv1.HostServicesServer, maxBytes int) uint32 {
	return wire.ServeHostServices(broker, impl, maxBytes)
}

// ToStatus turns err into a gRPC status error carrying the error envelope
// as an ErrorDetail. A nil err stays nil.
func ToStatus(err error) error { return wire.ToStatus(err) }

// FromStatus turns an error returned by a gRPC call back into a
// *wop.Error, classified by wop's rule; a status without an envelope gets
// a code derived from the gRPC code. A nil err gives nil.
func FromStatus(err error) *wop.Error { return wire.FromStatus(err) }

// CallContextToProto converts a call context for the wire.
func CallContextToProto(c wop.CallContext) *wophostv1.CallContext {
	return wire.CallContextToProto(c)
}

// CallContextFromProto converts a call context from the wire. A nil p
// gives the zero value.
func CallContextFromProto(p *wophostv1.CallContext) wop.CallContext {
	return wire.CallContextFromProto(p)
}

// RulesToProto converts the rules of the families a plugin serves for
// its DirectChannelSettings.
func RulesToProto(rules map[string]admission.Rules) []*wophostv1.FamilyRules {
	return direct.RulesToProto(rules)
}

// FacetRulesToProto converts a family's facet rules for Describe.
func FacetRulesToProto(rules []wop.FacetRule) []*wophostv1.FacetRule {
	return wire.FacetRulesToProto(rules)
}

// NewGrantKey returns a fresh key for the grants of one plugin process's
// direct channel.
func NewGrantKey() []byte { return direct.NewKey() }

// SignGrant returns the signed grant the host offers a pack with a direct
// channel: g under key, with a fresh nonce. The plugin holding key checks
// it on every call.
func SignGrant(key []byte, g *wophostv1.Grant) ([]byte, error) { return direct.Sign(key, g) }

// Relay is the host's side of a plugin process's direct channel, on which
// the calls the host relays to that plugin travel, each under a MAC of
// the channel's key, instead of on its gRPC connection.
type Relay = direct.Relay

// ErrChannelGone is a relayed node run whose pack channel closed during
// the run: the pack process went away, rather than the node failing.
var ErrChannelGone = direct.ErrGone

// FromDetail is the *wop.Error an ErrorDetail that arrived stands for.
func FromDetail(d *wophostv1.ErrorDetail) *wop.Error { return wire.FromDetail(d) }

// NewRelay returns the relay to the channel at ep with key, the key of
// the plugin's last Configure, bounding messages to maxBytes.
func NewRelay(ep *wophostv1.DirectChannelEndpoint, key []byte, maxBytes int) *Relay {
	return direct.NewRelay(ep, key, maxBytes)
}
