// Package admission decides whether a host-service call may run. The
// host's router admits the calls it routes with it, a plugin's direct
// channel the calls it takes from packs, and the conformance kit holds
// a plugin's channel to the same table: one set of rules, with the same
// codes and messages on every path.
//
// The two paths differ only in where the caller's declarations come
// from: the run's pack manifest on the routed path, the host's signed
// grant on a channel.
package admission

import (
	"slices"
	"time"

	"github.com/wophost/wophost/sdk/strictjson"
	"github.com/wophost/wophost/sdk/wop"
)

// Operator is the caller name of the operator's own calls (host call,
// host prompts). Only the host gives it; it declares everything.
const Operator = "operator"

// NodeCaller is the caller name of a call a pack's node makes.
func NodeCaller(pack, typeID string) string { return "pack " + pack + " node " + typeID }

// PluginCaller is the caller name of a call a capability plugin makes
// back to the host.
func PluginCaller(plugin string) string { return "plugin " + plugin }

// Call is one host-service call to admit.
type Call struct {
	// Caller names who makes the call in refusals: NodeCaller,
	// PluginCaller or Operator.
	Caller         string
	Family, Method string
	Payload        []byte
	// Depth is the call's hop count from the node run (1 for a node's own
	// call).
	Depth int
	// Deadline is when the call must be answered; zero for none.
	Deadline time.Time
}

// Limits bound every call of a host.
type Limits struct {
	// DepthLimit bounds Call.Depth.
	DepthLimit int
	// MaxBytes bounds a request and a result; 0 for no bound.
	MaxBytes int64
}

// Declared reports whether the caller declared family (facet "") or one
// of its facets. Nil declares everything: the operator's calls.
type Declared func(family, facet string) bool

// Rules are what a family asks of a call beyond the family itself. A
// core family's are the contract's, in its package under sdk/families; a
// vendor family declares its facet rules in its plugin's Describe.
type Rules struct {
	// Facets say which methods need which facet.
	Facets []wop.FacetRule
	// OperatorOnly lists the methods no pack, plugin or agent may call.
	OperatorOnly []string
}

// Facet returns the facet a call of method with payload needs, "" for
// none: that of the first rule for method (or for every method) that
// applies. A rule that depends on a member reads the payload as the
// plugin will (strictjson), so a request the two could read differently
// is refused here, a validation_error naming the member.
func (r Rules) Facet(method string, payload []byte) (string, error) {
	for _, rule := range r.Facets {
		if rule.Method != method && rule.Method != wop.EveryMethod {
			continue
		}
		if rule.When == "" {
			return rule.Facet, nil
		}
		set, err := strictjson.Flag(payload, rule.When, "request")
		if err != nil {
			return "", err
		}
		if set {
			return rule.Facet, nil
		}
	}
	return "", nil
}

// Admit returns why c may not run, or nil when it may, and the facet the
// call needs ("" for none), checking in this order: the request's size, the call's depth, least privilege (the
// family, and the facet rules' facet, against what the caller
// declared), operator-only methods, then the deadline against now.
// Whether the host serves the family is the caller's to check after:
// an undeclared call is refused whether or not the family is served, so
// that no one learns what the host serves without declaring it.
func Admit(c Call, lim Limits, declared Declared, rules Rules, now time.Time) (facet string, refusal *wop.Error) {
	if lim.MaxBytes > 0 && int64(len(c.Payload)) > lim.MaxBytes {
		return "", refuse(c, wop.CodeValidation, "request of %d bytes is over the %d-byte limit", len(c.Payload), lim.MaxBytes)
	}
	if c.Depth > lim.DepthLimit {
		return "", refuse(c, wop.CodeCallDepthExceeded, "call depth %d is over the limit of %d", c.Depth, lim.DepthLimit)
	}
	facet, err := rules.Facet(c.Method, c.Payload)
	if err != nil {
		return "", wop.AsError(err).WithCapability(capability(c))
	}
	if declared != nil && !declared(c.Family, facet) {
		what := c.Family
		if facet != "" {
			what += "." + facet
		}
		return "", refuse(c, wop.CodeCapabilityNotDeclared, "%s did not declare %s", c.Caller, what)
	}
	// Refused like an undeclared call, and for the same reason before
	// the caller looks the family up: no one but the operator can
	// declare it.
	if c.Caller != Operator && slices.Contains(rules.OperatorOnly, c.Method) {
		return "", refuse(c, wop.CodeCapabilityNotDeclared, "%s may not call %s.%s: only the operator may call it", c.Caller, c.Family, c.Method)
	}
	if !c.Deadline.IsZero() && !now.Before(c.Deadline) {
		return "", DeadlinePassed(c.Family, c.Method)
	}
	return facet, nil
}

// CheckResult bounds a call's result: a result over MaxBytes is the
// plugin's failure to answer within the contract.
func CheckResult(family, method string, out []byte, lim Limits) *wop.Error {
	if lim.MaxBytes > 0 && int64(len(out)) > lim.MaxBytes {
		return wop.Errorf(wop.CodeUpstreamUnavailable, "result of %d bytes is over the %d-byte limit", len(out), lim.MaxBytes).WithCapability(Capability(family, method))
	}
	return nil
}

// DeadlinePassed is the refusal of a call whose deadline passed.
func DeadlinePassed(family, method string) *wop.Error {
	return wop.Errorf(wop.CodeDeadlineExceeded, "the call's deadline passed").WithCapability(Capability(family, method))
}

// Capability is the capability a call of family.method concerns, as
// its refusals and failures name it.
func Capability(family, method string) string { return "host." + family + "." + method }

func capability(c Call) string { return Capability(c.Family, c.Method) }

func refuse(c Call, code, format string, args ...any) *wop.Error {
	return wop.Errorf(code, format, args...).WithCapability(capability(c))
}
