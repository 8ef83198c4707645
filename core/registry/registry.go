package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// Invoker sends one call to the plugin serving a family.
type Invoker interface {
	Invoke(ctx context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error)
}

// Family is one family a ready capability serves.
type Family struct {
	Name    string
	Status  string
	Since   string
	Until   string
	Witness string
	Methods []string
	Needs   []string
	Uses    []string
	// Pure are the methods a vendor family declares pure in Describe
	// (pure_methods); empty for a core family, whose pure methods the
	// contract fixes (IsPure).
	Pure []string
	// Rules are the facet rules a vendor family declares in Describe
	// (facet_rules); empty for a core family, whose rules the contract
	// fixes (hostwire.CoreRules).
	Rules admission.Rules
	// Facets maps each facet to its JSON settings ({} when it has none).
	Facets map[string]json.RawMessage
	// Details is a JSON object the plugin lists about the family under
	// its configuration; it is listed with the capability's Record and
	// never advertised.
	Details json.RawMessage
	// Direct is the direct channel of the process serving the family, nil
	// when it serves none.
	Direct *DirectChannel
}

// DirectChannel is a plugin process's direct channel as the host knows
// it: where it is served, the key of the grants it accepts, and how to
// end a run on it.
type DirectChannel struct {
	Endpoint *wophostv1.DirectChannelEndpoint
	Key      []byte
	// EndRun refuses the run's grants from now on and returns the calls
	// the run made on the channel (Capability.EndRun).
	EndRun func(ctx context.Context, runID string, deadline time.Time) (*wophostv1.EndRunResponse, error)
}

// Record is what the registry knows of one declared capability.
type Record struct {
	Name          string   `json:"name"`
	Plugin        string   `json:"plugin"`
	State         State    `json:"state"`
	FailedPhase   State    `json:"failedPhase,omitempty"`
	LastError     string   `json:"lastError,omitempty"`
	PluginName    string   `json:"pluginName,omitempty"`
	PluginVersion string   `json:"pluginVersion,omitempty"`
	Families      []string `json:"families,omitempty"`
	Advertised    []string `json:"advertised,omitempty"`
	Restarts      int      `json:"restarts"`
	// Warnings are problems of the config the plugin serves despite, as
	// it reported them at its last configuration.
	Warnings []string `json:"warnings,omitempty"`
	// Details maps each family the capability serves to what its plugin
	// lists about it under its configuration (the mcp family's servers,
	// say): our own listing, kept out of the discovery document.
	Details map[string]json.RawMessage `json:"details,omitempty"`
	// FacetRules maps each vendor family the capability serves to the
	// facet rules its plugin declared, which the host holds every call
	// to (a core family's are the contract's and are not listed).
	FacetRules map[string][]wop.FacetRule `json:"facetRules,omitempty"`
	Changed    time.Time                  `json:"changed"`
}

type entry struct {
	rec      Record
	families []Family
	invoker  Invoker
}

// Registry is safe for concurrent use.
type Registry struct {
	impl Implementation

	mu      sync.RWMutex
	order   []string
	entries map[string]*entry
	// advertised is recomputed on every change: family name → served.
	advertised map[string]served
	// provided are the families the host serves itself (Provide).
	provided []Family
	// roots are the host's records that are no family (SetRootRecord).
	roots map[string]Family
	doc   []byte
	// facets holds each advertised family's facets as a JSON object,
	// encoded once per change: every node run hands them to its pack.
	facets map[string][]byte
	now    func() time.Time
}

type served struct {
	family     Family
	capability string
	invoker    Invoker
}

// Implementation names the host in the advertisement.
type Implementation struct {
	Name    string
	Version string
}

// New returns an empty registry.
func New(impl Implementation) *Registry {
	r := &Registry{impl: impl, entries: map[string]*entry{}, now: time.Now}
	r.recompute()
	return r
}

// Implementation returns what names the host in the advertisement.
func (r *Registry) Implementation() Implementation { return r.impl }

// Declare adds a capability in the declared state.
func (r *Registry) Declare(name, plugin string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.entries[name]; !ok {
		r.order = append(r.order, name)
	}
	r.entries[name] = &entry{rec: Record{Name: name, Plugin: plugin, State: StateDeclared, Changed: r.now()}}
	r.recompute()
}

// Provide makes the host itself serve f: it is advertised while every
// family f.Needs names is advertised, and it takes precedence over a
// plugin describing a family of the same name. Its calls have no plugin to
// go to, so f should list no Methods. The host's agent registry is one:
// agents.manifestRuntime, which advertising agentRuntime implies.
func (r *Registry) Provide(f Family) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.provided = append(r.provided, f)
	r.recompute()
}

// SetRootRecord sets, or replaces, a record of the document's root that
// is no family of calls: OpenWOP v2's nodePackRuntimes, what the host
// itself can run. It is rendered after the core families, never listed by
// Advertised and never called.
func (r *Registry) SetRootRecord(name string, f Family) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.roots == nil {
		r.roots = map[string]Family{}
	}
	f.Name = name
	r.roots[name] = f
	r.recompute()
}

// Advance moves a capability to a non-terminal lifecycle state.
func (r *Registry) Advance(name string, s State) {
	r.update(name, func(e *entry) {
		e.rec.State = s
		if s != StateReady {
			e.invoker = nil
		}
	})
}

// Describe records what the plugin said about itself.
func (r *Registry) Describe(name, pluginName, pluginVersion string, families []string) {
	r.update(name, func(e *entry) {
		e.rec.PluginName, e.rec.PluginVersion = pluginName, pluginVersion
		e.rec.Families = append([]string(nil), families...)
		e.rec.State = StateDescribed
	})
}

// Fail marks a capability failed in phase, withdrawing its families.
func (r *Registry) Fail(name string, phase State, err error) {
	r.update(name, func(e *entry) {
		e.rec.State, e.rec.FailedPhase = StateFailed, phase
		if err != nil {
			e.rec.LastError = err.Error()
		}
		e.invoker, e.families = nil, nil
		e.rec.Details, e.rec.FacetRules = nil, nil
	})
}

// Wait marks a capability waiting for what err says it cannot reach yet,
// withdrawing its families until it is ready. Unlike Fail, the host keeps
// trying: waiting is not a failure and has no failed phase.
func (r *Registry) Wait(name string, err error) {
	r.update(name, func(e *entry) {
		e.rec.State, e.rec.FailedPhase = StateWaiting, ""
		if err != nil {
			e.rec.LastError = err.Error()
		}
		e.invoker, e.families = nil, nil
		e.rec.Details, e.rec.FacetRules = nil, nil
	})
}

// Crash marks a ready capability crashed, withdrawing its families until
// it is ready again.
func (r *Registry) Crash(name string, err error) {
	r.update(name, func(e *entry) {
		e.rec.State = StateCrashed
		if err != nil {
			e.rec.LastError = err.Error()
		}
		e.invoker = nil
	})
}

// Restarting records one more restart attempt of a crashed capability;
// Restarts counts every attempt since the host started.
func (r *Registry) Restarting(name string) {
	r.update(name, func(e *entry) {
		e.rec.State = StateRestarting
		e.rec.Restarts++
	})
}

// Ready marks a capability ready with the families it serves, routed to inv.
func (r *Registry) Ready(name string, families []Family, inv Invoker) {
	r.update(name, func(e *entry) {
		e.rec.State, e.rec.FailedPhase = StateReady, ""
		e.families, e.invoker = families, inv
		e.rec.Details, e.rec.FacetRules = detailsOf(families), facetRulesOf(families)
	})
}

// detailsOf collects the details of families, nil when none has any.
func detailsOf(families []Family) map[string]json.RawMessage {
	var out map[string]json.RawMessage
	for _, f := range families {
		if len(f.Details) == 0 {
			continue
		}
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		out[f.Name] = f.Details
	}
	return out
}

// facetRulesOf collects the facet rules of families, nil when none has
// any.
func facetRulesOf(families []Family) map[string][]wop.FacetRule {
	var out map[string][]wop.FacetRule
	for _, f := range families {
		if len(f.Rules.Facets) == 0 {
			continue
		}
		if out == nil {
			out = map[string][]wop.FacetRule{}
		}
		out[f.Name] = f.Rules.Facets
	}
	return out
}

// Adopt marks a declared capability ready with a plugin another registry
// described and counted: a reload that keeps a running plugin carries its
// name, version and restart count over to the next host's registry.
func (r *Registry) Adopt(name string, from Record, families []Family, inv Invoker) {
	r.update(name, func(e *entry) {
		e.rec.PluginName, e.rec.PluginVersion = from.PluginName, from.PluginVersion
		e.rec.Families = append([]string(nil), from.Families...)
		e.rec.Restarts = from.Restarts
		e.rec.State, e.rec.FailedPhase, e.rec.LastError = StateReady, "", ""
		e.families, e.invoker = families, inv
		e.rec.Details, e.rec.FacetRules = detailsOf(families), facetRulesOf(families)
	})
}

// Warn sets the config warnings of a capability, replacing earlier ones.
func (r *Registry) Warn(name string, warnings []string) {
	r.update(name, func(e *entry) {
		e.rec.Warnings = append([]string(nil), warnings...)
	})
}

// Record returns the record of the capability named name.
func (r *Registry) Record(name string) (Record, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.entries[name]
	if !ok {
		return Record{}, false
	}
	return e.rec, true
}

// Stop marks a capability stopped.
func (r *Registry) Stop(name string) {
	r.update(name, func(e *entry) {
		e.rec.State, e.invoker = StateStopped, nil
	})
}

func (r *Registry) update(name string, fn func(*entry)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[name]
	if !ok {
		return
	}
	fn(e)
	e.rec.Changed = r.now()
	r.recompute()
}

// Records lists every declared capability in declaration order.
func (r *Registry) Records() []Record {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Record, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.entries[n].rec)
	}
	return out
}

// Lookup returns the invoker and description of an advertised family.
func (r *Registry) Lookup(family string) (Invoker, Family, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.advertised[family]
	if !ok {
		return nil, Family{}, false
	}
	return s.invoker, s.family, true
}

// Withdrawn says why family is not advertised when its absence is only
// for a while: the capability that describes it is starting, crashed
// and about to restart, restarting or waiting for what it needs, or it
// is ready but a family it needs is withdrawn for one of those reasons.
// It returns that capability's name and state; ok is false for a family
// no capability describes or whose capability failed or stopped, which
// stays away until a reload.
func (r *Registry) Withdrawn(family string) (capability string, state State, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if _, served := r.advertised[family]; served {
		return "", "", false
	}
	return r.withdrawn(family, map[string]bool{})
}

// NotServed is the refusal of a call that needs capability (a family, or
// "family.facet", as "host.…" names it) when family is not advertised:
// unavailable and retryable while it is withdrawn only for a while
// (Withdrawn), so that a client tries again and an idempotency key keeps
// nothing; capability_not_provided otherwise.
func (r *Registry) NotServed(family, capability string) *wop.Error {
	c, state, ok := r.Withdrawn(family)
	if !ok {
		return wop.NotProvided(capability)
	}
	return wop.Errorf(wop.CodeUnavailable, "%s is withdrawn while capability %q is %s; try again shortly", capability, c, state).
		WithCapability(capability).WithRetryable(true).
		WithDetails(map[string]string{"withdrawnBy": c, "state": string(state)})
}

func (r *Registry) withdrawn(family string, seen map[string]bool) (string, State, bool) {
	if seen[family] {
		return "", "", false
	}
	seen[family] = true
	for _, n := range r.order {
		e := r.entries[n]
		if !slices.Contains(e.rec.Families, family) {
			continue
		}
		switch e.rec.State {
		case StateFailed, StateStopped:
			continue
		case StateReady:
			// Served, but withdrawn with a family it needs.
			for _, f := range e.families {
				if f.Name != family {
					continue
				}
				for _, need := range append(slices.Clone(f.Needs), implied[family]...) {
					fam, _ := SplitCapability(need, r.described)
					if _, served := r.advertised[fam]; served {
						continue
					}
					if c, s, ok := r.withdrawn(fam, seen); ok {
						return c, s, true
					}
				}
			}
		default:
			return n, e.rec.State, true
		}
	}
	return "", "", false
}

// described reports whether a declared capability describes family.
func (r *Registry) described(family string) bool {
	for _, e := range r.entries {
		if slices.Contains(e.rec.Families, family) {
			return true
		}
	}
	return false
}

// IsPure reports whether method of family is pure: it changes nothing
// anywhere and answers the same request the same way, so a replay runs it
// live; every other method is answered from the run's log. For a core
// family the contract says which are (promptLibrary.get and mcp's
// listTools, readResource and serverHealth); a vendor family's are those
// its plugin declared in Describe, looked up among the families of the
// ready capabilities; an unknown family has none.
func (r *Registry) IsPure(family, method string) bool {
	switch family {
	case wop.FamilyPromptLibrary:
		return promptlibrary.IsPureMethod(method)
	case wop.FamilyMCP:
		return mcp.IsPureMethod(method)
	}
	if wop.IsCoreFamily(family) {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if s, ok := r.advertised[family]; ok {
		return slices.Contains(s.family.Pure, method)
	}
	// A family withdrawn for now (a crashed plugin, a missing need) keeps
	// its declaration: what the plugin said about its methods still holds.
	for _, n := range r.order {
		for _, f := range r.entries[n].families {
			if f.Name == family {
				return slices.Contains(f.Pure, method)
			}
		}
	}
	return false
}

// Advertised returns the advertised families and their facets.
func (r *Registry) Advertised() map[string]map[string]json.RawMessage {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]map[string]json.RawMessage, len(r.advertised))
	for name, s := range r.advertised {
		out[name] = s.family.Facets
	}
	return out
}

// AdvertisedFacets returns each advertised family's facets as a JSON
// object, as a node run hands them to its pack. The map is shared and
// replaced, never changed, when the advertisement changes: callers must
// not modify it.
func (r *Registry) AdvertisedFacets() map[string][]byte {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.facets
}

// Has reports whether family (and facet, when not empty) is advertised.
func (r *Registry) Has(family, facet string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return has(r.advertised, family, facet)
}

// Document returns the advertisement document. Its bytes change only when
// what is served changes.
func (r *Registry) Document() []byte {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.doc
}

func has(adv map[string]served, family, facet string) bool {
	s, ok := adv[family]
	if !ok {
		return false
	}
	if facet == "" {
		return true
	}
	_, ok = s.family.Facets[facet]
	return ok
}

// implied lists, for each family, what advertising it implies must also be
// advertised (docs/contract.md §2.3).
var implied = map[string][]string{
	wop.FamilyAgentRuntime: {wop.FamilyAgents + ".manifestRuntime"},
}

// hostInvoker answers calls to a family the host provides itself; such
// families have no methods, so the router refuses calls before this.
type hostInvoker struct{}

func (hostInvoker) Invoke(_ context.Context, family, method string, _ []byte, _ wop.CallContext) ([]byte, error) {
	return nil, wop.Errorf(wop.CodeNotFound, "family %s has no method %q", family, method)
}

// recompute derives the advertised set from the ready entries: a family is
// advertised only while every family it needs or implies is advertised,
// which may take several passes to settle.
func (r *Registry) recompute() {
	adv := map[string]served{}
	for _, n := range r.order {
		e := r.entries[n]
		if e.rec.State != StateReady || e.invoker == nil {
			continue
		}
		for _, f := range e.families {
			adv[f.Name] = served{family: f, capability: n, invoker: e.invoker}
		}
	}
	for _, f := range r.provided {
		adv[f.Name] = served{family: f, invoker: hostInvoker{}}
	}
	for changed := true; changed; {
		changed = false
		for name, s := range adv {
			for _, need := range append(append([]string(nil), s.family.Needs...), implied[name]...) {
				fam, facet := SplitCapability(need, func(f string) bool { _, ok := adv[f]; return ok })
				if !has(adv, fam, facet) {
					delete(adv, name)
					changed = true
					break
				}
			}
		}
	}
	for _, n := range r.order {
		e := r.entries[n]
		e.rec.Advertised = nil
		for _, f := range e.families {
			if s, ok := adv[f.Name]; ok && s.capability == n {
				e.rec.Advertised = append(e.rec.Advertised, f.Name)
			}
		}
	}
	r.advertised = adv
	r.doc = r.render(adv)
	r.facets = encodeFacets(adv)
}

// encodeFacets is each family's facets as a JSON object.
func encodeFacets(adv map[string]served) map[string][]byte {
	out := make(map[string][]byte, len(adv))
	for name, s := range adv {
		// A plugin's facets were decoded from JSON and the host's are
		// built in Go, so they always marshal; {} keeps a run's request
		// valid should that ever change.
		b, err := json.Marshal(s.family.Facets)
		if err != nil || s.family.Facets == nil {
			b = []byte("{}")
		}
		out[name] = b
	}
	return out
}

// render writes the document with a fixed key order: root metadata, the
// core families in contract order, then extensions sorted by name. Facet
// objects are re-encoded with sorted keys.
func (r *Registry) render(adv map[string]served) []byte {
	var b strings.Builder
	b.WriteString(`{"protocolVersions":["2.0"],"preferredVersion":"2.0","implementation":`)
	writeJSON(&b, map[string]string{"name": r.impl.Name, "version": r.impl.Version})
	for _, name := range wop.CoreFamilies() {
		if s, ok := adv[name]; ok {
			b.WriteString(",")
			writeJSON(&b, name)
			b.WriteString(":")
			writeRecord(&b, s.family)
		}
	}
	roots := make([]string, 0, len(r.roots))
	for name := range r.roots {
		roots = append(roots, name)
	}
	sort.Strings(roots)
	for _, name := range roots {
		b.WriteString(",")
		writeJSON(&b, name)
		b.WriteString(":")
		writeRecord(&b, r.roots[name])
	}
	var ext []string
	for name := range adv {
		if !wop.IsCoreFamily(name) {
			ext = append(ext, name)
		}
	}
	sort.Strings(ext)
	if len(ext) > 0 {
		b.WriteString(`,"extensions":{`)
		for i, name := range ext {
			if i > 0 {
				b.WriteString(",")
			}
			writeJSON(&b, name)
			b.WriteString(":")
			writeRecord(&b, adv[name].family)
		}
		b.WriteString("}")
	}
	b.WriteString("}")
	return []byte(b.String())
}

func writeRecord(b *strings.Builder, f Family) {
	status := f.Status
	if status == "" {
		status = "experimental"
	}
	since := f.Since
	if since == "" {
		since = "2.0"
	}
	b.WriteString(`{"status":`)
	writeJSON(b, status)
	b.WriteString(`,"since":`)
	writeJSON(b, since)
	if f.Until != "" {
		b.WriteString(`,"until":`)
		writeJSON(b, f.Until)
	}
	if f.Witness != "" {
		b.WriteString(`,"witness":`)
		writeJSON(b, f.Witness)
	}
	keys := make([]string, 0, len(f.Facets))
	for k := range f.Facets {
		if k == "status" || k == "since" || k == "until" || k == "witness" {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(",")
		writeJSON(b, k)
		b.WriteString(":")
		b.Write(canonicalJSON(f.Facets[k]))
	}
	b.WriteString("}")
}

func writeJSON(b *strings.Builder, v any) {
	// Only strings and string maps reach here, and they always marshal;
	// null keeps the document valid JSON should that ever change.
	out, err := json.Marshal(v)
	if err != nil {
		out = []byte("null")
	}
	b.Write(out)
}

// canonicalJSON re-encodes a JSON value with sorted object keys, keeping
// numbers as written. Invalid JSON becomes {} so one bad facet cannot
// corrupt the whole document.
func canonicalJSON(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return []byte("{}")
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte("{}")
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
}
