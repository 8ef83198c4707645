package packmanifest

import (
	"cmp"
	"slices"
)

// The runtime requirements: what a pack's process may need of the machine
// beyond computing, named in runtime.requires. OpenWOP closes the list; an
// operator grants them (the sandbox block's allow).
const (
	RuntimeNetDNS      = "net.dns"
	RuntimeNetOutbound = "net.outbound"
	RuntimeCrypto      = "crypto"
	RuntimeSubprocess  = "subprocess"
	RuntimeFSRead      = "fs.read"
	RuntimeFSWrite     = "fs.write"
	RuntimeEnvRead     = "env.read"
	RuntimeClock       = "clock"
)

// RuntimeRequirements returns the vocabulary of runtime.requires, in the
// order OpenWOP's schema lists it. The slice is the caller's own.
func RuntimeRequirements() []string {
	return []string{
		RuntimeNetDNS, RuntimeNetOutbound, RuntimeCrypto, RuntimeSubprocess,
		RuntimeFSRead, RuntimeFSWrite, RuntimeEnvRead, RuntimeClock,
	}
}

// IsRuntimeRequirement reports whether s is a runtime.requires token.
func IsRuntimeRequirement(s string) bool {
	return slices.Contains(RuntimeRequirements(), s)
}

// Requirement is one family, or one facet of a family, that a pack or node
// needs the host to advertise.
type Requirement struct {
	Family string
	// Facet is empty when the requirement is the family itself.
	Facet string
	// Optional requirements degrade the pack instead of refusing it.
	Optional bool
}

// String returns "family" or "family.facet".
func (r Requirement) String() string {
	if r.Facet == "" {
		return r.Family
	}
	return r.Family + "." + r.Facet
}

// PeerRequirements lists the pack's peer dependencies: one entry per family
// and one per facet named in its meta, optional when the value is
// "optional" or the meta says so. The list is sorted by family, then facet.
func (m *Manifest) PeerRequirements() []Requirement {
	var out []Requirement
	for family, val := range m.PeerDependencies {
		meta := m.PeerDependenciesMeta[family]
		opt := val == Optional || meta.Optional
		out = append(out, Requirement{Family: family, Optional: opt})
		for _, f := range meta.Facets {
			out = append(out, Requirement{Family: family, Facet: f, Optional: opt})
		}
	}
	return sortRequirements(out)
}

// Node returns the node with the typeId, if the pack has one.
func (m *Manifest) Node(typeID string) (*Node, bool) {
	for i := range m.Nodes {
		if m.Nodes[i].TypeID == typeID {
			return &m.Nodes[i], true
		}
	}
	return nil, false
}

// NodeRequirements lists what must be advertised for the node to be
// dispatched: the pack's required peer requirements plus the node's own
// requires, sorted. It is nil for an unknown typeId.
func (m *Manifest) NodeRequirements(typeID string) []Requirement {
	n, ok := m.Node(typeID)
	if !ok {
		return nil
	}
	var out []Requirement
	for _, r := range m.PeerRequirements() {
		if !r.Optional {
			out = append(out, r)
		}
	}
	out = append(out, m.nodeRequires(n)...)
	return sortRequirements(out)
}

// Declared returns the least-privilege test for calls made by the node:
// it reports whether family (and facet, when not empty) is named by the
// pack's peerDependencies, required or optional, or by the node's requires.
// Naming a facet also names its family. For an unknown typeId nothing is
// declared.
func (m *Manifest) Declared(typeID string) func(family, facet string) bool {
	type key struct{ family, facet string }
	set := map[key]bool{}
	if n, ok := m.Node(typeID); ok {
		for _, r := range append(m.PeerRequirements(), m.nodeRequires(n)...) {
			set[key{r.Family, r.Facet}] = true
			set[key{r.Family, ""}] = true
		}
	}
	return func(family, facet string) bool {
		return set[key{family, facet}]
	}
}

// nodeRequires parses the node's requires the way Validate did, against
// the pack's declared vendor families.
func (m *Manifest) nodeRequires(n *Node) []Requirement {
	known := vendorFamilies(m.PeerDependencies)
	out := make([]Requirement, 0, len(n.Requires))
	for _, s := range n.Requires {
		family, facet, msg := parseRequire(s, known)
		if msg == "" {
			out = append(out, Requirement{Family: family, Facet: facet})
		}
	}
	return out
}

// sortRequirements sorts rs by family then facet and merges duplicates,
// where a required entry beats an optional one.
func sortRequirements(rs []Requirement) []Requirement {
	slices.SortFunc(rs, func(a, b Requirement) int {
		if c := cmp.Compare(a.Family, b.Family); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Facet, b.Facet); c != 0 {
			return c
		}
		// Required first, so that CompactFunc below keeps it.
		switch {
		case a.Optional == b.Optional:
			return 0
		case b.Optional:
			return -1
		default:
			return 1
		}
	})
	return slices.CompactFunc(rs, func(a, b Requirement) bool {
		return a.Family == b.Family && a.Facet == b.Facet
	})
}
