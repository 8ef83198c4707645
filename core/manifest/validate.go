package manifest

import (
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/wophost/wophost/sdk/wop"
)

var (
	namePattern   = regexp.MustCompile(`^[a-z][a-z0-9-]*(\.[a-z0-9][a-z0-9-]*)+$`)
	typeIDPattern = regexp.MustCompile(`^[a-z][a-zA-Z0-9-]*(\.[a-zA-Z0-9][a-zA-Z0-9_-]*)+$`)
	facetPattern  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_-]*$`)
	semverPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][a-zA-Z0-9-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][a-zA-Z0-9-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
)

func coreFamilyList() string { return strings.Join(wop.CoreFamilies(), ", ") }

// legacyPrefix starts the v1 spelling of a peer dependency,
// "host.<family>[.<facet>]".
const legacyPrefix = "host."

// Validate checks m, rewrites legacy peer dependency spellings to their v2
// form and compiles the nodes' schemas. Parse calls it; call it yourself
// only on a Manifest built in code. On failure m is left unchanged and the
// error is the same pack_validation_failed *wop.Error Parse returns.
//
// Legacy spelling: a v1 key "host.aiEnvelope" or "host.aiEnvelope.await"
// (value "required", "optional", or v1's "supported", read as required)
// becomes the family key "aiEnvelope" plus, for the second, the facet
// "await" in peerDependenciesMeta. When one family is declared several
// ways, required wins. "host." always starts a legacy key, so no vendor
// family may use the org "host". requires entries accept the same spelling.
func (m *Manifest) Validate() error {
	var ps problems
	m.validate(&ps)
	return ps.err(FileName)
}

// validate records every problem in ps and updates m only when there are
// none, so that a refused manifest is never half-normalised.
func (m *Manifest) validate(ps *problems) {
	n := len(*ps)

	switch {
	case m.Name == "":
		ps.add("/name", "is required")
	case !namePattern.MatchString(m.Name):
		ps.add("/name", `must be reverse-DNS style, e.g. "community.demo"`)
	}
	checkVersion(ps, "/version", m.Version)
	if m.Kind != "node" {
		ps.add("/kind", `must be "node"`)
	}
	if m.Runtime.Language == "" {
		ps.add("/runtime/language", "is required")
	}
	if msg := checkEntry(m.Runtime.Entry); msg != "" {
		ps.add("/runtime/entry", msg)
	}
	if len(m.Nodes) == 0 && len(m.Agents) == 0 {
		ps.add("/nodes", "a pack needs at least one node or agent")
	}
	m.checkPrompts(ps)
	peers, meta := m.normalisePeers(ps)
	nodes := m.checkNodes(ps, peers)

	if len(*ps) > n {
		return
	}
	m.PeerDependencies, m.PeerDependenciesMeta, m.Nodes = peers, meta, nodes
}

func checkVersion(ps *problems, field, v string) {
	switch {
	case v == "":
		ps.add(field, "is required")
	case !semverPattern.MatchString(v):
		ps.add(field, `must be a semantic version, e.g. "1.2.0"`)
	}
}

// checkEntry explains why entry cannot be the pack's executable, or returns
// "". The entry must stay inside the pack directory whatever the host's OS,
// so both separators are considered.
func checkEntry(entry string) string {
	switch {
	case entry == "":
		return "is required"
	case strings.ContainsRune(entry, 0):
		return "must not contain a NUL byte"
	case strings.HasPrefix(entry, "/"), strings.HasPrefix(entry, `\`), len(entry) >= 2 && entry[1] == ':', filepath.IsAbs(entry):
		return "must be a path relative to the pack directory"
	}
	for _, seg := range strings.FieldsFunc(entry, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == ".." {
			return `must not contain ".."`
		}
	}
	if path.Clean(strings.ReplaceAll(entry, `\`, "/")) == "." {
		return "must name a file inside the pack directory"
	}
	return ""
}

// normalisePeers checks peerDependencies and peerDependenciesMeta and
// returns them with legacy keys folded into their family.
func (m *Manifest) normalisePeers(ps *problems) (map[string]string, map[string]PeerMeta) {
	var peers map[string]string
	legacyFacets := map[string][]string{}
	for _, key := range sortedKeys(m.PeerDependencies) {
		field := "/peerDependencies" + pointer(key)
		family, facet, legacy, msg := parsePeerKey(key)
		if msg != "" {
			ps.add(field, msg)
			continue
		}
		val := m.PeerDependencies[key]
		switch {
		case val == Required || val == Optional:
		case legacy && val == "supported":
			val = Required
		default:
			ps.add(field, `must be "required" or "optional"`)
			continue
		}
		if peers == nil {
			peers = map[string]string{}
		}
		if prev, ok := peers[family]; !ok || prev == Optional {
			peers[family] = val
		}
		if facet != "" {
			legacyFacets[family] = append(legacyFacets[family], facet)
		}
	}

	var meta map[string]PeerMeta
	for _, key := range sortedKeys(m.PeerDependenciesMeta) {
		field := "/peerDependenciesMeta" + pointer(key)
		if _, ok := peers[key]; !ok {
			if family, _, legacy, _ := parsePeerKey(key); legacy {
				ps.add(field, `use the family name "`+family+`"`)
			} else if _, raw := m.PeerDependencies[key]; !raw {
				ps.add(field, "is not declared in peerDependencies")
			}
			continue
		}
		pm := m.PeerDependenciesMeta[key]
		var facets []string
		for i, f := range pm.Facets {
			if !facetPattern.MatchString(f) {
				ps.add(field+"/facets"+pointer(strconv.Itoa(i)), "must be a facet name, e.g. \"await\"")
				continue
			}
			if !slices.Contains(facets, f) {
				facets = append(facets, f)
			}
		}
		if meta == nil {
			meta = map[string]PeerMeta{}
		}
		meta[key] = PeerMeta{Facets: facets, Optional: pm.Optional}
	}
	for _, family := range sortedKeys(legacyFacets) {
		if meta == nil {
			meta = map[string]PeerMeta{}
		}
		pm := meta[family]
		for _, f := range legacyFacets[family] {
			if !slices.Contains(pm.Facets, f) {
				pm.Facets = append(pm.Facets, f)
			}
		}
		meta[family] = pm
	}
	return peers, meta
}

// parsePeerKey reads a peerDependencies key: a core family, a vendor family
// or a legacy "host.<family>[.<facet>]". msg explains a bad key.
func parsePeerKey(key string) (family, facet string, legacy bool, msg string) {
	if rest, ok := strings.CutPrefix(key, legacyPrefix); ok {
		family, facet, msg = parseLegacy(rest)
		return family, facet, true, msg
	}
	if wop.IsCoreFamily(key) {
		return key, "", false, ""
	}
	if org, _, ok := strings.Cut(key, "."); ok && wop.IsCoreFamily(org) {
		return "", "", false, `a facet of ` + org + ` is declared in peerDependenciesMeta["` + org + `"].facets`
	}
	if ok, why := wop.ValidVendorFamily(key); !ok {
		return "", "", false, "is neither a core family (" + coreFamilyList() + ") nor a vendor family: " + why
	}
	return key, "", false, ""
}

// parseLegacy reads what follows "host." in a v1 capability name.
func parseLegacy(rest string) (family, facet, msg string) {
	family, facet, dotted := strings.Cut(rest, ".")
	if !wop.IsCoreFamily(family) {
		return "", "", `a v1 "host.<family>" name needs a core family (` + coreFamilyList() + ")"
	}
	if dotted && !facetPattern.MatchString(facet) {
		return "", "", `a v1 "host.<family>.<facet>" name needs a facet name after the family`
	}
	return family, facet, ""
}

// MaxTypeIDBytes bounds a node's typeId: long enough for any reverse-DNS
// name, short enough that a typeId can be quoted in errors and logs.
const MaxTypeIDBytes = 256

// checkNodes checks each node and returns copies with their requires
// normalised and their schemas compiled.
func (m *Manifest) checkNodes(ps *problems, peers map[string]string) []Node {
	known := vendorFamilies(peers)
	seen := map[string]int{}
	nodes := make([]Node, len(m.Nodes))
	for i, n := range m.Nodes {
		field := "/nodes" + pointer(strconv.Itoa(i))
		switch prev, dup := seen[n.TypeID]; {
		case n.TypeID == "":
			ps.add(field+"/typeId", "is required")
		case len(n.TypeID) > MaxTypeIDBytes:
			ps.add(field+"/typeId", "is longer than "+strconv.Itoa(MaxTypeIDBytes)+" bytes")
		case !typeIDPattern.MatchString(n.TypeID):
			ps.add(field+"/typeId", `must be a dotted type name, e.g. "acme.summarize"`)
		case dup:
			ps.add(field+"/typeId", "duplicates /nodes/"+strconv.Itoa(prev)+"/typeId")
		default:
			seen[n.TypeID] = i
		}
		checkVersion(ps, field+"/version", n.Version)
		if n.Category == "" {
			ps.add(field+"/category", "is required")
		}
		if n.Role == "" {
			ps.add(field+"/role", "is required")
		}
		n.Requires = slices.Clone(n.Requires)
		for j, r := range n.Requires {
			family, facet, msg := parseRequire(r, known)
			if msg != "" {
				ps.add(field+"/requires"+pointer(strconv.Itoa(j)), msg)
				continue
			}
			n.Requires[j] = Requirement{Family: family, Facet: facet}.String()
		}
		n.InputSchema, n.input = compileSchema(ps, field+"/inputSchema", n.InputSchema)
		n.OutputSchema, n.output = compileSchema(ps, field+"/outputSchema", n.OutputSchema)
		nodes[i] = n
	}
	return nodes
}

// vendorFamilies returns the test for "is a vendor family the pack
// declares", which decides whether "org.name.x" is family org.name with
// facet x or the vendor family org.name.x.
func vendorFamilies(peers map[string]string) func(string) bool {
	return func(f string) bool {
		_, ok := peers[f]
		return ok && !wop.IsCoreFamily(f)
	}
}

// parseRequire reads a requires entry: "family" or "family.facet", family
// core or vendor. msg explains a bad entry.
func parseRequire(s string, known func(string) bool) (family, facet, msg string) {
	if s == "" {
		return "", "", "must not be empty"
	}
	if rest, ok := strings.CutPrefix(s, legacyPrefix); ok {
		return parseLegacy(rest)
	}
	family, facet = wop.SplitCapability(s, known)
	if wop.IsCoreFamily(family) || known(family) {
		if family != s && !facetPattern.MatchString(facet) {
			return "", "", "needs a facet name after " + family + "."
		}
		return family, facet, ""
	}
	if org, _, ok := strings.Cut(s, "."); ok && wop.IsCoreFamily(org) {
		return "", "", `must be "` + org + `" or "` + org + `.<facet>"`
	}
	if ok, why := wop.ValidVendorFamily(family); !ok {
		return "", "", "is neither a core family (" + coreFamilyList() + "), a family.facet, nor a vendor family: " + why
	}
	return family, "", ""
}
