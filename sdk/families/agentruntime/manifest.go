package agentruntime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

// Manifest is an agent manifest as a pack ships it in pack.json agents[]
// (docs/contract.md §4.3). Its identity is its digest (Digest), not its id: two
// manifests with the same id and different content are different agents.
type Manifest struct {
	// ID names the agent in the registry and in spawn's manifestId.
	ID string `json:"id"`
	// Name is a short human-readable name.
	Name string `json:"name"`
	// Description says what the agent does. best-match delegation scores
	// tasks against it, so it should name the work the agent is good at.
	Description string `json:"description"`
	// Model, when set, is passed to aiEnvelope.generate as its model.
	Model string `json:"model,omitempty"`
	// SystemPromptRef is a pinned prompt: name@<version>,
	// name@sha256:<hex> or name@<version>#sha256:<hex>.
	SystemPromptRef string `json:"systemPromptRef"`
	// ToolAllowlist lists the MCP tools the agent may call, each as
	// "serverId/toolName". An empty list means no tools.
	ToolAllowlist []string `json:"toolAllowlist"`
	// Handoff, when set, lists the agents this one may hand work to.
	Handoff *Handoff `json:"handoff,omitempty"`
	// Limits bound every run of the agent; unset fields take the
	// runtime's defaults.
	Limits *Limits `json:"limits,omitempty"`
	// Skills describe what the agent is good at, for best-match
	// delegation and for listings.
	Skills []Skill `json:"skills,omitempty"`
}

// Handoff lists the manifests an agent may hand a task to. Each target is
// a manifest id in the same registry.
type Handoff struct {
	Targets []string `json:"targets"`
}

// Limits bound one run of an agent. A nil field means "the runtime's
// default"; a run never exceeds the runtime's configured maximum either.
type Limits struct {
	// Turns is the number of generate calls a run may make.
	Turns *int `json:"turns,omitempty"`
	// ToolCalls is the number of MCP tool calls a run may make.
	ToolCalls *int `json:"toolCalls,omitempty"`
	// DelegationDepth is how deep a chain of handoffs may go from this
	// agent; 0 forbids handoffs.
	DelegationDepth *int `json:"delegationDepth,omitempty"`
	// TimeoutMs bounds the wall-clock time of a run.
	TimeoutMs *int64 `json:"timeoutMs,omitempty"`
	// TokenBudget bounds input plus output tokens over a run, as reported
	// by generate's usage.
	TokenBudget *int64 `json:"tokenBudget,omitempty"`
}

// Skill is one thing an agent is good at, in the spirit of an A2A agent
// card skill.
type Skill struct {
	ID          string   `json:"id"`
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags,omitempty"`
}

// Bounds on manifest sizes, so that a hostile pack cannot make the host
// hold or digest arbitrarily large agent records.
const (
	MaxManifestBytes     = 64 << 10
	maxIDLen             = 64
	maxNameLen           = 128
	maxDescriptionLen    = 4096
	maxModelLen          = 256
	maxPromptRefLen      = 512
	maxAllowlist         = 256
	maxHandoffTargets    = 64
	maxSkills            = 64
	maxTags              = 32
	maxTagLen            = 64
	maxLimitTurns        = 1000
	maxLimitToolCalls    = 10000
	maxLimitDepth        = 16
	maxLimitTimeoutMs    = 24 * 60 * 60 * 1000
	maxLimitTokenBudget  = 1_000_000_000
	maxToolNameLen       = 128
	maxServerIDLen       = 128
	manifestDigestPrefix = "sha256:"
)

var (
	idPattern       = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?$`)
	serverIDPattern = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._-]*)$`)
	toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

// FieldError is one problem in a manifest. Pointer is the RFC 6901 JSON
// pointer of the offending value inside the manifest ("" for the whole
// manifest), so a host can prefix it with the manifest's place in
// pack.json ("/agents/2" + Pointer).
type FieldError struct {
	Pointer string
	Message string
}

// Error implements error.
func (e *FieldError) Error() string {
	p := e.Pointer
	if p == "" {
		p = "(root)"
	}
	return p + ": " + e.Message
}

// ManifestError holds every problem found in one manifest, in document
// order.
type ManifestError struct {
	Problems []*FieldError
}

// Error implements error.
func (e *ManifestError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Error()
	}
	return "invalid agent manifest: " + strings.Join(parts, "; ")
}

// problems collects FieldErrors while a manifest is checked.
type problems []*FieldError

func (ps *problems) add(pointer, format string, args ...any) {
	*ps = append(*ps, &FieldError{Pointer: pointer, Message: fmt.Sprintf(format, args...)})
}

func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &ManifestError{Problems: ps}
}

// ParseManifest decodes and validates one agent manifest from JSON. Unknown
// fields, wrong types and invalid values are all reported, each with its
// JSON pointer, as a *ManifestError.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestBytes {
		return nil, &ManifestError{Problems: []*FieldError{{Message: fmt.Sprintf("manifest is %d bytes, over the %d-byte limit", len(data), MaxManifestBytes)}}}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &ManifestError{Problems: []*FieldError{{Message: "malformed JSON: " + err.Error()}}}
	}
	if dec.More() {
		return nil, &ManifestError{Problems: []*FieldError{{Message: "data after the JSON value"}}}
	}
	var ps problems
	m := decodeManifest(&ps, v)
	if err := ps.err(); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// optionalFields are the manifest fields that may be absent or null.
var optionalFields = map[string]bool{"model": true, "handoff": true, "limits": true, "skills": true}

// decodeManifest builds a Manifest from a generic JSON value, reporting
// unknown fields and wrong types with their pointers. Values are checked
// afterwards by Validate.
func decodeManifest(ps *problems, v any) *Manifest {
	obj, ok := v.(map[string]any)
	if !ok {
		ps.add("", "expected a JSON object, got %s", jsonKind(v))
		return &Manifest{}
	}
	m := &Manifest{}
	for _, k := range sortedKeys(obj) {
		val, p := obj[k], "/"+escapePointer(k)
		if val == nil && optionalFields[k] {
			continue // null stands for an absent optional field
		}
		switch k {
		case "id":
			m.ID = decodeString(ps, p, val)
		case "name":
			m.Name = decodeString(ps, p, val)
		case "description":
			m.Description = decodeString(ps, p, val)
		case "model":
			m.Model = decodeString(ps, p, val)
		case "systemPromptRef":
			m.SystemPromptRef = decodeString(ps, p, val)
		case "toolAllowlist":
			m.ToolAllowlist = decodeStrings(ps, p, val)
			if m.ToolAllowlist == nil {
				m.ToolAllowlist = []string{}
			}
		case "handoff":
			m.Handoff = decodeHandoff(ps, p, val)
		case "limits":
			m.Limits = decodeLimits(ps, p, val)
		case "skills":
			m.Skills = decodeSkills(ps, p, val)
		default:
			ps.add(p, "unknown field %q", k)
		}
	}
	// A missing toolAllowlist stays nil, which Validate reports.
	return m
}

func decodeHandoff(ps *problems, p string, v any) *Handoff {
	obj, ok := v.(map[string]any)
	if !ok {
		ps.add(p, "expected an object, got %s", jsonKind(v))
		return nil
	}
	h := &Handoff{}
	for _, k := range sortedKeys(obj) {
		switch k {
		case "targets":
			h.Targets = decodeStrings(ps, p+"/targets", obj[k])
		default:
			ps.add(p+"/"+escapePointer(k), "unknown field %q", k)
		}
	}
	return h
}

func decodeLimits(ps *problems, p string, v any) *Limits {
	obj, ok := v.(map[string]any)
	if !ok {
		ps.add(p, "expected an object, got %s", jsonKind(v))
		return nil
	}
	l := &Limits{}
	for _, k := range sortedKeys(obj) {
		fp := p + "/" + escapePointer(k)
		if obj[k] == nil {
			continue // every limit is optional; null leaves it unset
		}
		switch k {
		case "turns":
			l.Turns = intPtr(decodeInt(ps, fp, obj[k]))
		case "toolCalls":
			l.ToolCalls = intPtr(decodeInt(ps, fp, obj[k]))
		case "delegationDepth":
			l.DelegationDepth = intPtr(decodeInt(ps, fp, obj[k]))
		case "timeoutMs":
			l.TimeoutMs = decodeInt(ps, fp, obj[k])
		case "tokenBudget":
			l.TokenBudget = decodeInt(ps, fp, obj[k])
		default:
			ps.add(fp, "unknown field %q", k)
		}
	}
	return l
}

func decodeSkills(ps *problems, p string, v any) []Skill {
	arr, ok := v.([]any)
	if !ok {
		ps.add(p, "expected an array, got %s", jsonKind(v))
		return nil
	}
	out := make([]Skill, 0, len(arr))
	for i, el := range arr {
		ep := fmt.Sprintf("%s/%d", p, i)
		obj, ok := el.(map[string]any)
		if !ok {
			ps.add(ep, "expected an object, got %s", jsonKind(el))
			out = append(out, Skill{})
			continue
		}
		var s Skill
		for _, k := range sortedKeys(obj) {
			fp := ep + "/" + escapePointer(k)
			switch k {
			case "id":
				s.ID = decodeString(ps, fp, obj[k])
			case "description":
				s.Description = decodeString(ps, fp, obj[k])
			case "tags":
				s.Tags = decodeStrings(ps, fp, obj[k])
			default:
				ps.add(fp, "unknown field %q", k)
			}
		}
		out = append(out, s)
	}
	return out
}

func decodeString(ps *problems, p string, v any) string {
	s, ok := v.(string)
	if !ok {
		ps.add(p, "expected a string, got %s", jsonKind(v))
	}
	return s
}

func decodeStrings(ps *problems, p string, v any) []string {
	arr, ok := v.([]any)
	if !ok {
		ps.add(p, "expected an array of strings, got %s", jsonKind(v))
		return nil
	}
	out := make([]string, 0, len(arr))
	for i, el := range arr {
		out = append(out, decodeString(ps, fmt.Sprintf("%s/%d", p, i), el))
	}
	return out
}

func decodeInt(ps *problems, p string, v any) *int64 {
	n, ok := v.(json.Number)
	if !ok {
		ps.add(p, "expected an integer, got %s", jsonKind(v))
		return nil
	}
	i, err := n.Int64()
	if err != nil {
		ps.add(p, "expected an integer, got %s", n.String())
		return nil
	}
	return &i
}

func intPtr(p *int64) *int {
	if p == nil {
		return nil
	}
	// Validate bounds every limit well inside int range; clamp here so
	// that the conversion cannot wrap before it does.
	v := *p
	if v > 1<<31-1 {
		v = 1<<31 - 1
	} else if v < -1<<31 {
		v = -1 << 31
	}
	i := int(v)
	return &i
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// escapePointer escapes one RFC 6901 reference token.
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// Validate checks every field of m and returns a *ManifestError listing
// each problem with its JSON pointer, or nil. ParseManifest calls it; call
// it yourself for a Manifest built in Go.
func (m *Manifest) Validate() error {
	var ps problems
	if m == nil {
		ps.add("", "manifest is missing")
		return ps.err()
	}
	checkID(&ps, "/id", m.ID)
	checkText(&ps, "/name", m.Name, maxNameLen, true)
	checkText(&ps, "/description", m.Description, maxDescriptionLen, true)
	if m.Model != "" {
		checkText(&ps, "/model", m.Model, maxModelLen, false)
	}
	if m.SystemPromptRef == "" {
		ps.add("/systemPromptRef", "is required")
	} else if len(m.SystemPromptRef) > maxPromptRefLen {
		ps.add("/systemPromptRef", "is longer than %d bytes", maxPromptRefLen)
	} else if _, err := ParsePromptPin(m.SystemPromptRef); err != nil {
		ps.add("/systemPromptRef", "%v", err)
	}
	if m.ToolAllowlist == nil {
		ps.add("/toolAllowlist", "is required (an empty list allows no tools)")
	} else if len(m.ToolAllowlist) > maxAllowlist {
		ps.add("/toolAllowlist", "has %d entries, over the limit of %d", len(m.ToolAllowlist), maxAllowlist)
	} else {
		seen := map[string]int{}
		for i, e := range m.ToolAllowlist {
			p := fmt.Sprintf("/toolAllowlist/%d", i)
			if _, err := ParseToolRef(e); err != nil {
				ps.add(p, "%v", err)
				continue
			}
			if j, dup := seen[e]; dup {
				ps.add(p, "repeats /toolAllowlist/%d (%q)", j, e)
			}
			seen[e] = i
		}
	}
	if m.Handoff != nil {
		switch {
		case m.Handoff.Targets == nil:
			ps.add("/handoff/targets", "is required")
		case len(m.Handoff.Targets) > maxHandoffTargets:
			ps.add("/handoff/targets", "has %d entries, over the limit of %d", len(m.Handoff.Targets), maxHandoffTargets)
		default:
			seen := map[string]bool{}
			for i, t := range m.Handoff.Targets {
				p := fmt.Sprintf("/handoff/targets/%d", i)
				checkID(&ps, p, t)
				if t == m.ID && t != "" {
					ps.add(p, "an agent cannot hand off to itself")
				}
				if seen[t] {
					ps.add(p, "repeats target %q", t)
				}
				seen[t] = true
			}
		}
	}
	if m.Limits != nil {
		m.Limits.check(&ps, "/limits")
	}
	if len(m.Skills) > maxSkills {
		ps.add("/skills", "has %d entries, over the limit of %d", len(m.Skills), maxSkills)
	} else {
		seen := map[string]bool{}
		for i, s := range m.Skills {
			p := fmt.Sprintf("/skills/%d", i)
			checkID(&ps, p+"/id", s.ID)
			if seen[s.ID] && s.ID != "" {
				ps.add(p+"/id", "repeats skill %q", s.ID)
			}
			seen[s.ID] = true
			checkText(&ps, p+"/description", s.Description, maxDescriptionLen, false)
			if len(s.Tags) > maxTags {
				ps.add(p+"/tags", "has %d entries, over the limit of %d", len(s.Tags), maxTags)
			}
			for j, tag := range s.Tags {
				checkText(&ps, fmt.Sprintf("%s/tags/%d", p, j), tag, maxTagLen, true)
			}
		}
	}
	return ps.err()
}

// Validate checks that every limit that is set lies in its range and
// returns a *ManifestError whose pointers are relative to the limits
// object ("/turns"), or nil.
func (l *Limits) Validate() error {
	var ps problems
	if l != nil {
		l.check(&ps, "")
	}
	return ps.err()
}

func (l *Limits) check(ps *problems, prefix string) {
	checkRange(ps, prefix+"/turns", ptr64(l.Turns), 1, maxLimitTurns)
	checkRange(ps, prefix+"/toolCalls", ptr64(l.ToolCalls), 0, maxLimitToolCalls)
	checkRange(ps, prefix+"/delegationDepth", ptr64(l.DelegationDepth), 0, maxLimitDepth)
	checkRange(ps, prefix+"/timeoutMs", l.TimeoutMs, 1, maxLimitTimeoutMs)
	checkRange(ps, prefix+"/tokenBudget", l.TokenBudget, 1, maxLimitTokenBudget)
}

func ptr64(p *int) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

func checkID(ps *problems, p, id string) {
	switch {
	case id == "":
		ps.add(p, "is required")
	case len(id) > maxIDLen:
		ps.add(p, "is longer than %d bytes", maxIDLen)
	case !idPattern.MatchString(id):
		ps.add(p, "%q is not an id: lowercase letters, digits, '.', '_' and '-', starting and ending with a letter or digit", id)
	}
}

func checkText(ps *problems, p, s string, max int, required bool) {
	switch {
	case required && strings.TrimSpace(s) == "":
		ps.add(p, "is required")
	case len(s) > max:
		ps.add(p, "is longer than %d bytes", max)
	case strings.ContainsFunc(s, isControl):
		ps.add(p, "contains a control character")
	}
}

func isControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f
}

func checkRange(ps *problems, p string, v *int64, lo, hi int64) {
	if v == nil {
		return
	}
	if *v < lo || *v > hi {
		ps.add(p, "must be between %d and %d, got %d", lo, hi, *v)
	}
}

// PromptPin is a parsed systemPromptRef, in the one pin grammar the host
// and every prompt store use (promptlibrary.ParsePin).
type PromptPin = promptlibrary.Pin

// ErrUnpinned is promptlibrary.ErrUnpinned: ParsePromptPin's error wraps it
// when the reference names no version and no digest, or a moving label
// such as "latest".
var ErrUnpinned = promptlibrary.ErrUnpinned

// ParsePromptPin parses a systemPromptRef with promptlibrary.ParsePin, so
// that an agent manifest accepts exactly the references the host resolves.
func ParsePromptPin(ref string) (PromptPin, error) {
	return promptlibrary.ParsePin(ref)
}

// ToolRef is one parsed toolAllowlist entry.
type ToolRef struct {
	ServerID string
	Tool     string
}

// String formats r as "serverId/toolName".
func (r ToolRef) String() string { return r.ServerID + "/" + r.Tool }

// ParseToolRef parses "serverId/toolName". The server id is the host's MCP
// server name; the tool name follows MCP's tool naming (letters, digits,
// '_', '-', '.', at most 128 characters). There are no wildcards: an agent
// is allowed exactly the tools it lists.
func ParseToolRef(s string) (ToolRef, error) {
	server, tool, ok := strings.Cut(s, "/")
	if !ok {
		return ToolRef{}, fmt.Errorf("%q is not serverId/toolName", s)
	}
	switch {
	case server == "" || len(server) > maxServerIDLen || !serverIDPattern.MatchString(server):
		return ToolRef{}, fmt.Errorf("%q: server id %q is not valid", s, server)
	case tool == "" || len(tool) > maxToolNameLen || !toolNamePattern.MatchString(tool):
		return ToolRef{}, fmt.Errorf("%q: tool name %q is not valid (letters, digits, '_', '-', '.'; at most %d)", s, tool, maxToolNameLen)
	}
	return ToolRef{ServerID: server, Tool: tool}, nil
}

// Tools returns the parsed toolAllowlist. It assumes m is valid and skips
// any entry that does not parse.
func (m *Manifest) Tools() []ToolRef {
	out := make([]ToolRef, 0, len(m.ToolAllowlist))
	for _, e := range m.ToolAllowlist {
		if r, err := ParseToolRef(e); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// Allows reports whether the manifest's allowlist names serverID/tool
// exactly.
func (m *Manifest) Allows(serverID, tool string) bool {
	for _, e := range m.ToolAllowlist {
		if e == serverID+"/"+tool {
			return true
		}
	}
	return false
}

// MCPServers returns the distinct server ids the allowlist names, sorted,
// so that a host can check each against its mcp configuration.
func (m *Manifest) MCPServers() []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range m.Tools() {
		if !seen[r.ServerID] {
			seen[r.ServerID] = true
			out = append(out, r.ServerID)
		}
	}
	sort.Strings(out)
	return out
}

// Canonical returns the manifest's canonical JSON: object keys sorted
// bytewise, no insignificant whitespace, absent optional fields omitted,
// toolAllowlist always present, strings escaped as encoding/json does but
// without HTML escaping, integers in plain decimal. For the value domain a
// manifest uses (ASCII keys, strings, integers) this is the JSON
// Canonicalization Scheme of RFC 8785.
func (m *Manifest) Canonical() ([]byte, error) {
	c := *m
	if c.ToolAllowlist == nil {
		c.ToolAllowlist = []string{}
	}
	raw, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("marshal manifest: %w", err)
	}
	// Round-trip through a generic value: encoding/json writes map keys
	// sorted, which fixes the key order whatever the struct order is.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("re-read manifest: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode canonical manifest: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Digest returns "sha256:<hex>" of the canonical JSON. It is the
// manifest's identity: spawn reports it, and replays compare it.
func (m *Manifest) Digest() (string, error) {
	b, err := m.Canonical()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return manifestDigestPrefix + hex.EncodeToString(sum[:]), nil
}
