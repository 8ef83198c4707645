package wop

import (
	"regexp"
	"strings"
	"time"
)

// CallContext identifies the node run a call belongs to. It travels with
// every call across every hop.
type CallContext struct {
	RunID          string    `json:"runId,omitempty"`
	NodeID         string    `json:"nodeId,omitempty"`
	TypeID         string    `json:"typeId,omitempty"`
	Pack           string    `json:"pack,omitempty"`
	Caller         string    `json:"caller,omitempty"`
	Depth          int       `json:"depth,omitempty"`
	Deadline       time.Time `json:"deadline,omitzero"`
	Traceparent    string    `json:"traceparent,omitempty"`
	IdempotencyKey string    `json:"idempotencyKey,omitempty"`
	// Token binds the call to its run (see RunToken). The host sets it and
	// the SDKs carry it; it never appears in the JSON of a call context.
	Token RunToken `json:"-"`
}

// The core families of the host-services contract, and the family that
// agentRuntime implies.
const (
	FamilyAIEnvelope    = "aiEnvelope"
	FamilyPromptLibrary = "promptLibrary"
	FamilyAgentRuntime  = "agentRuntime"
	FamilyAgents        = "agents"
	FamilyMCP           = "mcp"
)

// CoreFamilies lists the families that sit at the root of the
// advertisement, in the order they appear there.
func CoreFamilies() []string {
	return []string{FamilyAIEnvelope, FamilyPromptLibrary, FamilyAgentRuntime, FamilyAgents, FamilyMCP}
}

// IsCoreFamily reports whether name is one of CoreFamilies.
func IsCoreFamily(name string) bool {
	for _, f := range CoreFamilies() {
		if f == name {
			return true
		}
	}
	return false
}

var vendorFamilyPattern = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)*$`)

// reservedOrgs may not be used by vendor families.
var reservedOrgs = map[string]bool{"openwop": true, "vendor": true, "effect-seams": true, "events": true}

// ValidVendorFamily reports whether name is a well-formed vendor family
// ("org.name", lowercase, org not reserved), with the reason when it is not.
func ValidVendorFamily(name string) (bool, string) {
	if !vendorFamilyPattern.MatchString(name) {
		return false, `a vendor family is "org.name": lowercase letters, digits and dashes, dot-separated`
	}
	org := name[:strings.IndexByte(name, '.')]
	if reservedOrgs[org] {
		return false, "the org " + org + " is reserved"
	}
	return true, ""
}

// PackCaller is the CallContext.Caller of the calls a pack's nodes make.
func PackCaller(pack string) string { return "pack:" + pack }

// PluginCaller is the CallContext.Caller of the calls a capability
// plugin makes back to the host.
func PluginCaller(plugin string) string { return "plugin:" + plugin }
