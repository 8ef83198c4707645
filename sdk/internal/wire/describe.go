package wire

import (
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// Description is what a plugin says about itself in Describe.
type Description struct {
	Name     string
	Version  string
	Families []FamilyDescription
	// SingleWriter: the plugin's state admits one process at a time.
	SingleWriter bool
	// DirectChannel: the plugin serves a direct channel, checking the
	// host's grants on every call.
	DirectChannel bool
}

// FamilyDescription is one family a plugin says it can serve.
type FamilyDescription struct {
	Name, Status, Since, Until, Witness string
	Methods, Needs, Uses                []string
	// PureMethods are the methods the family declares pure (pure_methods).
	PureMethods []string
	// FacetRules are the facet rules a vendor family declares
	// (facet_rules).
	FacetRules []wop.FacetRule
}

// DescriptionFromProto converts a Describe answer into plain Go.
func DescriptionFromProto(resp *wophostv1.DescribeResponse) *Description {
	d := &Description{Name: resp.GetName(), Version: resp.GetVersion(), SingleWriter: resp.GetSingleWriter(), DirectChannel: resp.GetDirectChannel()}
	for _, f := range resp.GetFamilies() {
		d.Families = append(d.Families, FamilyDescription{
			Name: f.GetName(), Status: f.GetStatus(), Since: f.GetSince(), Until: f.GetUntil(), Witness: f.GetWitness(),
			Methods: f.GetMethods(), Needs: f.GetNeeds(), Uses: f.GetUses(), PureMethods: f.GetPureMethods(),
			FacetRules: FacetRulesFromProto(f.GetFacetRules()),
		})
	}
	return d
}

// FacetRulesFromProto converts the facet rules of Describe or of
// DirectChannelSettings.
func FacetRulesFromProto(in []*wophostv1.FacetRule) []wop.FacetRule {
	var out []wop.FacetRule
	for _, r := range in {
		out = append(out, wop.FacetRule{Method: r.GetMethod(), Facet: r.GetFacet(), When: r.GetWhenMember()})
	}
	return out
}

// FacetRulesToProto converts facet rules for Describe.
func FacetRulesToProto(in []wop.FacetRule) []*wophostv1.FacetRule {
	var out []*wophostv1.FacetRule
	for _, r := range in {
		out = append(out, &wophostv1.FacetRule{Method: r.Method, Facet: r.Facet, WhenMember: r.When})
	}
	return out
}
