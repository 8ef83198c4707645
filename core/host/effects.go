package host

import (
	"fmt"
	"sort"

	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/wop"
)

// EffectManifestVersion is the version of OpenWOP's effect-seam manifest
// format EffectManifest follows.
const EffectManifestVersion = "1"

// Kinds of effect seam, as OpenWOP's effect-seam manifest names them.
const (
	SeamKindHTTP          = "http"
	SeamKindSMTP          = "smtp"
	SeamKindQueue         = "queue"
	SeamKindStorage       = "storage"
	SeamKindProviderSDK   = "provider-sdk"
	SeamKindWebhookFanout = "webhook-fanout"
	// SeamKindOther needs a note naming the mechanism.
	SeamKindOther = "other"
)

// seamGuard is what guards every seam: a replay answers a side-effecting
// call from the invocation log instead of performing it again.
const seamGuard = "wophost invocation log: replay answers from the source run's recorded outcome"

// EffectManifest is OpenWOP's effect-seam manifest of the host: every
// place where a node run reaches beyond the host, and what keeps a replay
// from doing it twice. GET /host/effect-seams and `host effects` serve it.
type EffectManifest struct {
	ManifestVersion string       `json:"manifestVersion"`
	Host            EffectHost   `json:"host"`
	Seams           []EffectSeam `json:"seams"`
}

// EffectHost names the host the manifest describes.
type EffectHost struct {
	Name string `json:"name"`
	// Build is the host's version.
	Build string `json:"build"`
}

// EffectSeam is one side-effecting host-service method.
type EffectSeam struct {
	// Seam is "family.method".
	Seam string `json:"seam"`
	// Kind is one of the SeamKind constants.
	Kind string `json:"kind"`
	// Guarded says a replay does not perform the effect again; GuardedBy
	// says what prevents it.
	Guarded   bool   `json:"guarded"`
	GuardedBy string `json:"guardedBy,omitempty"`
	// BranchReFires says a live branch of a run (replay --live) performs
	// the effect again.
	BranchReFires bool `json:"branchReFires"`
	// Note names the mechanism and what serves it.
	Note string `json:"note,omitempty"`
}

// EffectSeams returns the effect-seam manifest of what the host advertises
// now.
func (h *Host) EffectSeams() EffectManifest { return EffectSeamsOf(h.reg) }

// EffectSeamsOf builds the effect-seam manifest of the families reg
// advertises now: one seam per method that is not pure (Registry.IsPure),
// sorted by name. A pure method is run live on replay and reaches nothing
// a replay must not reach again, so it is no seam.
func EffectSeamsOf(reg *registry.Registry) EffectManifest {
	impl := reg.Implementation()
	m := EffectManifest{
		ManifestVersion: EffectManifestVersion,
		Host:            EffectHost{Name: impl.Name, Build: impl.Version},
		Seams:           []EffectSeam{},
	}
	for _, rec := range reg.Records() {
		for _, family := range rec.Advertised {
			_, f, ok := reg.Lookup(family)
			if !ok {
				continue
			}
			for _, method := range f.Methods {
				if reg.IsPure(family, method) {
					continue
				}
				kind, note := seamKind(rec, family, method)
				m.Seams = append(m.Seams, EffectSeam{
					Seam: family + "." + method, Kind: kind,
					Guarded: true, GuardedBy: seamGuard, BranchReFires: true, Note: note,
				})
			}
		}
	}
	sort.Slice(m.Seams, func(i, j int) bool { return m.Seams[i].Seam < m.Seams[j].Seam })
	return m
}

// seamKind returns the kind of the seam family.method, served by the
// capability rec, and the note that names its mechanism.
func seamKind(rec registry.Record, family, method string) (kind, note string) {
	by := fmt.Sprintf("capability %q (plugin %s)", rec.Name, rec.PluginName)
	switch family {
	case wop.FamilyAIEnvelope:
		return SeamKindProviderSDK, "the model provider configured for " + by + ", such as HTTP to the model's API; the model's answer is the recorded fact"
	case wop.FamilyMCP:
		request := method
		if method == mcp.MethodCallTool {
			request = "tools/call"
		}
		return SeamKindOther, "MCP " + request + " request to a server configured for " + by + "; a tool may act on the world"
	case wop.FamilyAgentRuntime:
		if method == agentruntime.MethodInstances {
			return SeamKindStorage, "operator-only listing of the agent instances in the store of " + by + ": answers from its current state"
		}
		return SeamKindOther, "spawns or messages agents through " + by + "; the agents' own calls pass through the host, each a seam of its own"
	case wop.FamilyPromptLibrary:
		return SeamKindStorage, "operator-only management of the prompt store of " + by + ": changes it or answers from its current state"
	}
	if wop.IsCoreFamily(family) {
		return SeamKindOther, "host-service call served by " + by
	}
	return SeamKindOther, "vendor family call served by " + by + "; the family declares no pure method of this name"
}
