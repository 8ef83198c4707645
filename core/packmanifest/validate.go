package packmanifest

import (
	"encoding/json"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/wop"
)

// OpenWOP error codes of refusals that are not pack_validation_failed.
// They reach callers as the code of a *wop.Error; the sdk has no use for
// them, since pack code never sees a pack refused.
const (
	// CodePackKindInvalid refuses a manifest whose kind is not "node".
	CodePackKindInvalid = "pack_kind_invalid"
	// CodePackEngineUnsupported refuses a pack whose engines.openwop
	// range does not admit this host's protocol major.
	CodePackEngineUnsupported = "pack_engine_unsupported"
	// CodePackPeerDependencyUndefined refuses a pack whose
	// peerDependencies key declares nothing OpenWOP defines: neither a
	// core family, a vendor family, nor a v1 spelling of the alias
	// table. A vendor family no plugin serves is
	// pack_peer_dependency_missing instead, at load.
	CodePackPeerDependencyUndefined = "pack_peer_dependency_undefined"
	// CodeOAuthProviderUnsupported refuses a pack whose node needs OAuth:
	// this host has no OAuth flow.
	CodeOAuthProviderUnsupported = "oauth_provider_unsupported"
	// CodeCredentialUnavailable refuses to dispatch a node that needs
	// secrets or credentials: this host resolves neither.
	CodeCredentialUnavailable = "credential_unavailable"
)

// codePriority orders the codes of problems: the refusal takes the first
// one any problem carries.
var codePriority = [...]string{CodePackKindInvalid, CodePackEngineUnsupported, CodePackPeerDependencyUndefined, CodeOAuthProviderUnsupported}

// ProtocolMajor is the major version of OpenWOP this host implements; a
// pack's engines.openwop range must admit it.
const ProtocolMajor = 2

func coreFamilyList() string { return strings.Join(wop.CoreFamilies(), ", ") }

// legacyPrefix starts the v1 spelling of a peer dependency,
// "host.<family>[.<facet>]".
const legacyPrefix = "host."

// validate checks what the format's shape cannot say, and what this host
// makes of a valid manifest, recording every problem in ps and the notes
// in m. It updates m only when there are no problems, so that a refused
// manifest is never half-normalised.
func (m *Manifest) validate(ps *problems) {
	n := len(*ps)

	if m.Kind != "" && m.Kind != "node" {
		ps.addCode("/kind", CodePackKindInvalid, `is `+strconv.Quote(m.Kind)+`; this host loads node packs only: write "kind": "node"`)
	}
	m.checkEngines(ps)
	m.checkRuntime(ps)
	if len(m.Nodes) == 0 && len(m.Agents) == 0 {
		ps.add("/nodes", "a pack needs at least one node or agent")
	}
	if len(m.Dependencies) > 0 {
		ps.add("/dependencies", "names other packs ("+strings.Join(sortedKeys(m.Dependencies), ", ")+
			"); this host does not resolve dependencies between packs: remove them and load each pack with a pack block of its own")
	}
	m.checkConnector(ps)
	m.checkPrompts(ps)
	peers, meta := m.normalisePeers(ps)
	nodes := m.checkNodes(ps, peers)

	if len(*ps) > n {
		return
	}
	// Notes read the values as written, before normalising.
	m.Notes = m.notes()
	m.PeerDependencies, m.PeerDependenciesMeta, m.Nodes = peers, meta, nodes
}

// DefaultEngineCeiling is the major ceiling OpenWOP reads into a range
// written without one: ">=1.0" means ">=1.0 <2.0.0".
const DefaultEngineCeiling = 2

// checkEngines refuses a range that does not admit ProtocolMajor. The
// shape checked the grammar: ">=A[.B[.C]] <N.0.0" admits major 2 when A
// is at most 2 and N above 2; without its ceiling N is
// DefaultEngineCeiling, so such a range never admits OpenWOP 2.
func (m *Manifest) checkEngines(ps *problems) {
	sub := enginesPattern.FindStringSubmatch(m.Engines.OpenWOP)
	if sub == nil {
		return
	}
	low, errLow := strconv.Atoi(sub[1])
	ceil, errCeil := DefaultEngineCeiling, error(nil)
	if sub[3] != "" {
		ceil, errCeil = strconv.Atoi(sub[3])
	}
	if errLow == nil && errCeil == nil && low <= ProtocolMajor && ceil > ProtocolMajor {
		return
	}
	msg := strconv.Quote(m.Engines.OpenWOP) + " does not admit OpenWOP " + strconv.Itoa(ProtocolMajor) + ", the protocol this host implements"
	if sub[3] == "" {
		msg = strconv.Quote(m.Engines.OpenWOP) + ` has no ceiling, which OpenWOP reads as "<` + strconv.Itoa(DefaultEngineCeiling) +
			`.0.0": it does not admit OpenWOP ` + strconv.Itoa(ProtocolMajor) + `, the protocol this host implements; write e.g. ">=2.0 <3.0.0"`
	}
	ps.addCode("/engines/openwop", CodePackEngineUnsupported, msg)
}

// checkRuntime checks the entry and refuses the runtimes this host cannot
// start: it starts runtime.entry as a local executable, or runs it as a
// core WebAssembly module.
func (m *Manifest) checkRuntime(ps *problems) {
	switch m.Runtime.Language {
	case "remote":
		ps.add("/runtime/language", `"remote" packs run on an MCP server; this host runs a pack's entry as a local executable, so it cannot load them`)
		return
	case "wasm-component":
		ps.add("/runtime/language", `"wasm-component" packs need the WebAssembly component model, which this host does not run; it runs core modules ("wasm", OpenWOP RFC 0008)`)
	case LanguageWasm:
		if f := m.Runtime.Format; f != "" && f != "wasm" {
			ps.add("/runtime/format", `must be "wasm" for a WebAssembly pack, not `+strconv.Quote(f))
		}
	}

	if len(m.Runtime.MCPServer) > 0 {
		ps.add("/runtime/mcpServer", `is only for runtime.language "remote"`)
	}
	if msg := checkEntry(m.Runtime.Entry); msg != "" {
		ps.add("/runtime/entry", msg)
	}
}

// checkConnector checks what the connector's shape leaves open: each
// action names a node of the pack, and the auth variant has its own keys.
// A connector whose actions need OAuth is refused like a node's auth.
func (m *Manifest) checkConnector(ps *problems) {
	if len(m.Connector) == 0 {
		return
	}
	var c struct {
		Auth *struct {
			Type     string          `json:"type"`
			Provider json.RawMessage `json:"provider"`
			Scopes   json.RawMessage `json:"scopes"`
			Key      json.RawMessage `json:"key"`
			Scope    json.RawMessage `json:"scope"`
		} `json:"auth"`
		Actions []struct {
			TypeID string `json:"typeId"`
		} `json:"actions"`
	}
	if json.Unmarshal(m.Connector, &c) != nil {
		return // the shape reported it
	}
	if a := c.Auth; a != nil {
		switch a.Type {
		case "oauth2":
			if a.Key != nil || a.Scope != nil {
				ps.add("/connector/auth", `an "oauth2" auth has provider and scopes, not key or scope`)
			} else if a.Provider == nil {
				ps.add("/connector/auth/provider", "is required")
			} else if !ps.has("/connector/auth") {
				ps.addCode("/connector/auth", CodeOAuthProviderUnsupported, "needs OAuth; this host has no OAuth flow, so it refuses the pack")
			}
		case "credential":
			if a.Provider != nil || a.Scopes != nil {
				ps.add("/connector/auth", `a "credential" auth has key and scope, not provider or scopes`)
			} else if a.Key == nil {
				ps.add("/connector/auth/key", "is required")
			}
		}
	}
	for i, a := range c.Actions {
		if a.TypeID == "" {
			continue
		}
		if _, ok := m.Node(a.TypeID); !ok {
			ps.add("/connector/actions/"+strconv.Itoa(i)+"/typeId", "names no node of this pack (connector_action_unresolved)")
		}
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
// returns them with v1 keys folded into their family.
//
// A key is a declaration key: a core family, a vendor family ("org.name")
// or a v1 spelling of the alias table (v1aliases.json): "host.aiEnvelope",
// "host.aiEnvelope.await" or the dotted facet path "aiEnvelope.await"
// (v1's value "supported" is read as required) becomes the family key
// "aiEnvelope" plus, for the last two, the facet "await" in
// peerDependenciesMeta. When one family is declared several ways, required
// wins. Any other key declares nothing OpenWOP defines and is refused with
// pack_peer_dependency_undefined, with a did-you-mean when a known key is
// close. "host." always starts a v1 key, so no vendor family may use the
// org "host".
func (m *Manifest) normalisePeers(ps *problems) (map[string]string, map[string]PeerMeta) {
	var peers map[string]string
	legacyFacets := map[string][]string{}
	for _, key := range sortedKeys(m.PeerDependencies) {
		field := "/peerDependencies" + pointer(key)
		family, facet, _, msg := parsePeerKey(key)
		if msg != "" {
			p := Problem{Field: field, Code: CodePackPeerDependencyUndefined, Message: msg, DidYouMean: didYouMean(key, declarationKeys())}
			if p.DidYouMean != "" {
				p.Message += "; did you mean " + strconv.Quote(p.DidYouMean) + "?"
			}
			ps.addProblem(p)
			continue
		}
		// OpenWOP leaves the value open (hosts put version ranges there);
		// "optional" is wophost's spelling of an optional peer, and
		// anything else is required, like a key without meta.
		val := m.PeerDependencies[key]
		switch val {
		case "":
			ps.add(field, `must not be empty: write "required", "optional" or a version range`)
			continue
		case Optional:
		default:
			val = Required
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
			if family, _, legacy, msg := parsePeerKey(key); legacy && msg == "" {
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
// or a v1 spelling of the alias table, which legacy reports. msg explains
// why any other key declares nothing.
func parsePeerKey(key string) (family, facet string, legacy bool, msg string) {
	if a, ok := aliasTable[key]; ok {
		return a.Family, a.Facet, true, ""
	}
	if wop.IsCoreFamily(key) {
		return key, "", false, ""
	}
	if strings.HasPrefix(key, legacyPrefix) {
		return "", "", true, `is not a v1 name OpenWOP still reads (` + strings.Join(sortedKeys(aliasTable), ", ") + `); write the core family (` + coreFamilyList() + `) it stands for`
	}
	if org, _, ok := strings.Cut(key, "."); ok && wop.IsCoreFamily(org) {
		return "", "", false, `is not a facet of ` + org + ` OpenWOP defines: declare the family "` + org + `" and its facets in peerDependenciesMeta["` + org + `"].facets`
	}
	if ok, why := wop.ValidVendorFamily(key); !ok {
		return "", "", false, "declares nothing: it is neither a core family (" + coreFamilyList() + "), a vendor family (" + why + "), nor a v1 name OpenWOP still reads"
	}
	return key, "", false, ""
}

// parseLegacy reads a v1 "host.<family>[.<facet>]" capability name
// through the alias table.
func parseLegacy(name string) (family, facet, msg string) {
	if a, ok := aliasTable[name]; ok && strings.HasPrefix(name, legacyPrefix) {
		return a.Family, a.Facet, ""
	}
	msg = `is not a v1 name OpenWOP still reads (` + strings.Join(sortedKeys(aliasTable), ", ") + `)`
	if s := didYouMean(name, sortedKeys(aliasTable)); s != "" {
		msg += `; did you mean "` + s + `"?`
	}
	return "", "", msg
}

// MaxTypeIDBytes bounds a node's typeId: long enough for any reverse-DNS
// name, short enough that a typeId can be quoted in errors and logs.
const MaxTypeIDBytes = 256

// checkNodes checks each node and returns copies with their requires
// normalised.
func (m *Manifest) checkNodes(ps *problems, peers map[string]string) []Node {
	known := vendorFamilies(peers)
	seen := map[string]int{}
	nodes := make([]Node, len(m.Nodes))
	for i, n := range m.Nodes {
		field := "/nodes" + pointer(strconv.Itoa(i))
		if prev, dup := seen[n.TypeID]; dup && n.TypeID != "" {
			ps.add(field+"/typeId", "duplicates /nodes/"+strconv.Itoa(prev)+"/typeId")
		} else {
			seen[n.TypeID] = i
		}
		for _, ref := range n.refs() {
			if msg := checkEntry(*ref.path); msg != "" && *ref.path != "" {
				ps.add(field+"/"+ref.key, msg)
			}
		}
		if msg := checkEntry(n.EnvelopeContractRef); msg != "" && n.EnvelopeContractRef != "" {
			ps.add(field+"/envelopeContractRef", msg)
		}
		if len(n.Auth) > 0 && !ps.has(field+"/auth") {
			ps.addCode(field+"/auth", CodeOAuthProviderUnsupported, "needs OAuth; this host has no OAuth flow, so it refuses the pack")
		}
		n.Requires = slices.Clone(n.Requires)
		for j, r := range n.Requires {
			family, facet, msg := parseRequire(r, known)
			if msg != "" {
				ps.add(field+"/"+RequiresKey+pointer(strconv.Itoa(j)), msg)
				continue
			}
			n.Requires[j] = Requirement{Family: family, Facet: facet}.String()
		}
		nodes[i] = n
	}
	return nodes
}

// schemaRef is one schema reference of a node: its key and its value.
type schemaRef struct {
	key  string
	path *string
}

// refs lists the node's schema references, set or not.
func (n *Node) refs() []schemaRef {
	return []schemaRef{
		{"configSchemaRef", &n.ConfigSchemaRef},
		{"inputSchemaRef", &n.InputSchemaRef},
		{"outputSchemaRef", &n.OutputSchemaRef},
	}
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
	if strings.HasPrefix(s, legacyPrefix) {
		return parseLegacy(s)
	}
	family, facet = registry.SplitCapability(s, known)
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
