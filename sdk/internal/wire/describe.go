package wire

import wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"

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
}

// DescriptionFromProto converts a Describe answer into plain Go.
func DescriptionFromProto(resp *wophostv1.DescribeResponse) *Description {
	d := &Description{Name: resp.GetName(), Version: resp.GetVersion(), SingleWriter: resp.GetSingleWriter(), DirectChannel: resp.GetDirectChannel()}
	for _, f := range resp.GetFamilies() {
		d.Families = append(d.Families, FamilyDescription{
			Name: f.GetName(), Status: f.GetStatus(), Since: f.GetSince(), Until: f.GetUntil(), Witness: f.GetWitness(),
			Methods: f.GetMethods(), Needs: f.GetNeeds(), Uses: f.GetUses(), PureMethods: f.GetPureMethods(),
		})
	}
	return d
}
