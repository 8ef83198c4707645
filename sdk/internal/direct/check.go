package direct

import (
	"time"

	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// CheckCall applies the host's checks of a relayed call to a call on g,
// in the router's order and with its codes and messages: size, depth,
// least privilege, then the deadline. now is the time of the call.
func CheckCall(g *wophostv1.Grant, family, method string, payload []byte, now time.Time) *wop.Error {
	capability := "host." + family + "." + method
	if max := g.GetMaxBytes(); max > 0 && int64(len(payload)) > max {
		return wop.Errorf(wop.CodeValidation, "request of %d bytes is over the %d-byte limit", len(payload), max).WithCapability(capability)
	}
	if g.GetDepth() > g.GetDepthLimit() {
		return wop.Errorf(wop.CodeCallDepthExceeded, "call depth %d is over the limit of %d", g.GetDepth(), g.GetDepthLimit()).WithCapability(capability)
	}
	facet := wop.RequiredFacet(family, method, payload)
	if !Allows(g, family, facet) {
		what := family
		if facet != "" {
			what += "." + facet
		}
		return wop.Errorf(wop.CodeCapabilityNotDeclared, "pack %s node %s did not declare %s", g.GetPack(), g.GetTypeId(), what).WithCapability(capability)
	}
	if d := g.GetDeadlineUnixNano(); d != 0 && !now.Before(time.Unix(0, d)) {
		return wop.Errorf(wop.CodeDeadlineExceeded, "the call's deadline passed").WithCapability(capability)
	}
	return nil
}

// CheckResult bounds a result as the router does: a result over the size
// limit is the plugin's failure to answer within the contract.
func CheckResult(g *wophostv1.Grant, family, method string, out []byte) *wop.Error {
	if max := g.GetMaxBytes(); max > 0 && int64(len(out)) > max {
		capability := "host." + family + "." + method
		return wop.Errorf(wop.CodeUpstreamUnavailable, "result of %d bytes is over the %d-byte limit", len(out), max).WithCapability(capability)
	}
	return nil
}
