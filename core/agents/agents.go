// Package agents is the host's agent registry, the host side of
// agents.manifestRuntime (docs/contract.md §4.3): the agent manifests of the
// installed packs, each validated, digested and checked against the host's
// promptLibrary and mcp configuration at install, then kept read-only.
//
// The registry also remembers the inline manifests the host let through
// spawn, so that the calls of an agent spawned from one are checked
// against its toolAllowlist like those of an installed agent.
package agents

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/wophost/wophost/sdk/families/agentruntime"
)

// Entry is one installed agent manifest. It is never modified after
// Install; callers must not modify it either.
type Entry struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// Digest is "sha256:<hex>" of Canonical, the manifest's identity.
	Digest string `json:"digest"`
	// Pack is the pack whose pack.json holds the manifest, and Index its
	// place in that pack's agents[].
	Pack  string `json:"pack"`
	Index int    `json:"-"`
	// SystemPrompt is what the systemPromptRef resolved to at install.
	SystemPrompt ResolvedPrompt `json:"systemPrompt"`
	// ToolAllowlist and MCPServers repeat the manifest's, for listings.
	ToolAllowlist []string `json:"toolAllowlist"`
	MCPServers    []string `json:"mcpServers,omitempty"`
	// Canonical is the manifest's canonical JSON, which spawn forwards.
	Canonical json.RawMessage `json:"manifest"`

	manifest *agentruntime.Manifest
}

// Manifest returns the parsed manifest.
func (e *Entry) Manifest() *agentruntime.Manifest { return e.manifest }

// ResolvedPrompt is a systemPromptRef and the version it resolved to.
type ResolvedPrompt struct {
	Ref     string `json:"ref"`
	Name    string `json:"name"`
	Version string `json:"version"`
	Digest  string `json:"digest"`
}

// NewEntry builds the entry of a validated manifest m, found at
// /agents/index of pack's pack.json.
func NewEntry(pack string, index int, m *agentruntime.Manifest, prompt ResolvedPrompt) (*Entry, error) {
	canonical, err := m.Canonical()
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", m.ID, err)
	}
	digest, err := m.Digest()
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", m.ID, err)
	}
	allow := append([]string{}, m.ToolAllowlist...)
	return &Entry{
		ID: m.ID, Name: m.Name, Description: m.Description, Digest: digest, Pack: pack, Index: index,
		SystemPrompt: prompt, ToolAllowlist: allow, MCPServers: m.MCPServers(),
		Canonical: canonical, manifest: m,
	}, nil
}

// MaxInline bounds the inline manifests the registry remembers, so that
// pack code spawning ever new manifests cannot grow the host without
// bound.
const MaxInline = 4096

// ErrInlineFull is returned by RememberInline once MaxInline distinct
// inline manifests are held.
var ErrInlineFull = fmt.Errorf("the host holds %d inline agent manifests, its limit", MaxInline)

// Registry is the agent registry. It is safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	byID     map[string]*Entry
	byDigest map[string]*agentruntime.Manifest
	order    []*Entry
	// inline are the digests remembered from inline spawns.
	inline map[string]bool
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{byID: map[string]*Entry{}, byDigest: map[string]*agentruntime.Manifest{}, inline: map[string]bool{}}
}

// Install adds the entries of one pack, all or none. An id another pack
// installed, or a handoff target that is neither in entries nor already
// installed, refuses the whole set with a pack_validation_failed error
// naming each field. Packs are installed in declaration order, so a
// handoff may name an agent of the same pack or of a pack declared
// before it.
func (r *Registry) Install(entries []*Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ps Problems
	own := map[string]bool{}
	for _, e := range entries {
		own[e.ID] = true
		if prev, ok := r.byID[e.ID]; ok {
			ps.Add(fmt.Sprintf("/agents/%d/id", e.Index), fmt.Sprintf("agent %q is already installed by pack %s", e.ID, prev.Pack))
		}
	}
	for _, e := range entries {
		if e.manifest.Handoff == nil {
			continue
		}
		for j, t := range e.manifest.Handoff.Targets {
			if _, ok := r.byID[t]; !ok && !own[t] {
				ps.Add(fmt.Sprintf("/agents/%d/handoff/targets/%d", e.Index, j),
					fmt.Sprintf("no agent %q in this pack or in a pack declared before it", t))
			}
		}
	}
	if err := ps.Err(); err != nil {
		return err
	}
	for _, e := range entries {
		r.byID[e.ID] = e
		r.byDigest[e.Digest] = e.manifest
		r.order = append(r.order, e)
	}
	return nil
}

// Has reports whether an agent with id is installed.
func (r *Registry) Has(id string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.byID[id]
	return ok
}

// Get returns the installed agent with id.
func (r *Registry) Get(id string) (*Entry, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.byID[id]
	return e, ok
}

// ByDigest returns the manifest with digest, installed or remembered
// from an inline spawn.
func (r *Registry) ByDigest(digest string) (*agentruntime.Manifest, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	m, ok := r.byDigest[digest]
	return m, ok
}

// RememberInline records an inline manifest that spawn let through, so
// that its agents' calls can be checked. It is a no-op for a digest
// already known.
func (r *Registry) RememberInline(digest string, m *agentruntime.Manifest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byDigest[digest]; ok {
		return nil
	}
	if len(r.inline) >= MaxInline {
		return ErrInlineFull
	}
	r.inline[digest] = true
	r.byDigest[digest] = m
	return nil
}

// CarryInline remembers the inline manifests from remembered, as far as
// the limit allows: the agents spawned under a host that a reload
// replaces keep running in the agent runtime, and their calls must still
// be checked against their manifests.
func (r *Registry) CarryInline(from *Registry) {
	from.mu.RLock()
	carried := make(map[string]*agentruntime.Manifest, len(from.inline))
	for d := range from.inline {
		carried[d] = from.byDigest[d]
	}
	from.mu.RUnlock()
	for d, m := range carried {
		if err := r.RememberInline(d, m); err != nil {
			return
		}
	}
}

// List returns the installed agents sorted by id.
func (r *Registry) List() []*Entry {
	r.mu.RLock()
	out := append([]*Entry(nil), r.order...)
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
