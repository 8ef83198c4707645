package host

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/core/sandbox"
	"github.com/wophost/wophost/sdk/tracing"
	"github.com/wophost/wophost/sdk/wop"
)

// PackSandbox is what `host packs` and GET /v1/packs show of a pack's
// containment.
type PackSandbox struct {
	// Contained is set when the pack's process starts through the
	// launcher.
	Contained bool `json:"contained"`
	// Granted lists the declared requirements the policy grants.
	Granted []string `json:"granted,omitempty"`
	// NotEnforced names each rule this host cannot enforce, with why.
	NotEnforced map[string]string `json:"notEnforced,omitempty"`
	// Required is the pack's require_sandbox.
	Required bool `json:"required,omitempty"`
}

// sandboxPolicy is the launcher's view of a sandbox block, with the
// trace collector's port open when the host exports traces, for the
// process's spans.
func (h *Host) sandboxPolicy(s config.Sandbox) sandbox.Policy {
	return sandbox.Policy{
		Allow:        s.Allow,
		MemoryBytes:  s.MemoryBytes,
		Processes:    s.Processes,
		ReadPaths:    s.ReadPaths,
		WritePaths:   s.WritePaths,
		RunAs:        s.RunAs,
		ConnectPorts: collectorPorts(h.opts.Tracing),
	}
}

// collectorPorts is the TCP port of the OTLP receiver t exports to, none
// when tracing is off. An endpoint without a port has its protocol's
// default (4317 for gRPC, 4318 for HTTP, 443 for an https URL).
func collectorPorts(t *tracing.Settings) []uint16 {
	if t == nil || t.Endpoint == "" {
		return nil
	}
	hostPort, def := t.Endpoint, "4317"
	if t.Protocol == tracing.ProtocolHTTP {
		def = "4318"
	}
	if u, err := url.Parse(t.Endpoint); err == nil && u.Host != "" && strings.Contains(t.Endpoint, "://") {
		hostPort = u.Host
		if u.Scheme == "https" {
			def = "443"
		}
	}
	port := def
	if _, p, err := net.SplitHostPort(hostPort); err == nil {
		port = p
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil
	}
	return []uint16{uint16(n)}
}

// notEnforced names the rules that cannot be enforced for a process under
// s on this host, with why: all of them when the host has no launcher.
func (h *Host) notEnforced(s config.Sandbox) map[string]string {
	if h.options.Launcher == "" {
		out := map[string]string{}
		for _, r := range sandbox.Rules() {
			out[r] = "the host was started without a launcher (an embedded host)"
		}
		return out
	}
	return h.sandbox.Unenforced(h.sandboxPolicy(s))
}

// checkRuntimeRequirements refuses p when it declares a runtime
// requirement its policy does not grant (OpenWOP's
// pack_runtime_requirement_unmet), or when require_sandbox is set and a
// rule cannot be enforced. A pack that is not contained declares what it
// likes: nothing is withheld from it.
func (h *Host) checkRuntimeRequirements(p *Pack) error {
	sb := p.cfg.Sandbox
	if !sb.Enabled {
		if p.cfg.RequireSandbox {
			return wop.Errorf(wop.CodePackRuntimeRequirementUnmet, "require_sandbox is set but the pack's sandbox block has enabled = false").
				WithDetails(map[string]any{"unmet": []string{"sandbox"}, "manifest": p.Name + "@" + p.Version})
		}
		return nil
	}
	if unmet := sandbox.Unmet(p.manifest.Runtime.Requires, sb.Allow); len(unmet) > 0 {
		return wop.Errorf(wop.CodePackRuntimeRequirementUnmet, "runtime.requires lists %s, which the pack's sandbox policy does not allow; grant it with sandbox { allow = [...] } in the pack's block if the pack may have it",
			strings.Join(unmet, ", ")).
			WithDetails(map[string]any{"unmet": unmet, "manifest": p.Name + "@" + p.Version,
				"advice": "add the requirement to the allow list of the pack's sandbox block"})
	}
	if p.cfg.RequireSandbox {
		if skipped := h.notEnforced(sb); len(skipped) > 0 {
			rules := slices.Sorted(maps.Keys(skipped))
			var why []string
			for _, r := range rules {
				why = append(why, r+" ("+skipped[r]+")")
			}
			return wop.Errorf(wop.CodePackRuntimeRequirementUnmet, "require_sandbox is set and this host cannot enforce: %s", strings.Join(why, "; ")).
				WithDetails(map[string]any{"unmet": []string{"sandbox"}, "manifest": p.Name + "@" + p.Version, "notEnforced": skipped})
		}
	}
	return nil
}

// packContainment is how p's process is contained, nil when it runs
// uncontained.
func (h *Host) packContainment(p *Pack) *loader.Containment {
	sb := p.cfg.Sandbox
	if !sb.Enabled || h.options.Launcher == "" {
		return nil
	}
	return &loader.Containment{
		Support:  h.sandbox,
		Launcher: h.options.Launcher,
		Policy:   h.sandboxPolicy(sb),
		Declared: p.manifest.Runtime.Requires,
		Dir:      p.Path,
		StateDir: filepath.Join(h.cfg.Host.StateDir, "packs", p.Name),
	}
}

// pluginContainment is how cc's plugin is contained: only when its block
// has a sandbox block. A plugin declares no requirements: what the
// operator allows is what it gets.
func (h *Host) pluginContainment(cc *config.Capability) *loader.Containment {
	sb := cc.Sandbox
	if sb == nil || !sb.Enabled || h.options.Launcher == "" {
		return nil
	}
	return &loader.Containment{
		Support:  h.sandbox,
		Launcher: h.options.Launcher,
		Policy:   h.sandboxPolicy(*sb),
		Declared: sb.Allow,
		Dir:      filepath.Dir(cc.PluginPath),
		StateDir: filepath.Join(h.cfg.Host.StateDir, "plugins", cc.Name),
	}
}

// packSandboxInfo is p's containment as listed.
func (h *Host) packSandboxInfo(p *Pack) *PackSandbox {
	sb := p.cfg.Sandbox
	if !sb.Enabled {
		return &PackSandbox{Required: p.cfg.RequireSandbox}
	}
	info := &PackSandbox{Contained: h.options.Launcher != "", NotEnforced: h.notEnforced(sb), Required: p.cfg.RequireSandbox}
	if p.manifest != nil {
		g := sandbox.Grant(p.manifest.Runtime.Requires, sb.Allow, sb.ReadPaths, sb.WritePaths)
		if t := g.Tokens(); t != "" {
			info.Granted = strings.Split(t, ",")
		}
	}
	return info
}

// FamilySandbox is the vendor family whose record says how the host
// contains its packs (OpenWOP RFC 0035's sandbox record, which the
// discovery document of OpenWOP 2.0 has no place for but its extensions).
const FamilySandbox = "wophost.sandbox"

// sandboxRecord is the advertisement's sandbox record: the host's default
// policy for packs, and which rules hold. Nil when packs are not
// contained by default.
func (h *Host) sandboxRecord() *registry.Family {
	sb := h.cfg.Host.Sandbox
	if !sb.Enabled || h.options.Launcher == "" {
		return nil
	}
	skipped := h.notEnforced(sb)
	enforced := []string{}
	for _, r := range sandbox.Rules() {
		if _, ok := skipped[r]; !ok && (r != sandbox.RuleUser || sb.RunAs != "") {
			enforced = append(enforced, r)
		}
	}
	facet := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			panic(fmt.Sprintf("sandbox record: %v", err))
		}
		return b
	}
	return &registry.Family{
		Name: FamilySandbox, Status: "experimental", Since: "2.0", Until: "2027-12-31", Witness: "witnessable-gated",
		Facets: map[string]json.RawMessage{
			"isolationModel":   facet("process"),
			"memoryLimitBytes": facet(sb.MemoryBytes),
			"wallClockLimitMs": facet(h.cfg.Host.RunTimeout.Milliseconds()),
			"rules":            facet(map[string]any{"enforced": enforced, "notEnforced": skipped}),
		},
	}
}

// memoryExceeded is the failure of a run whose pack the kernel killed for
// its memory cap, nil when that is not what happened.
func (h *Host) memoryExceeded(p *Pack, proc *loader.Pack, typeID string) error {
	limit, exceeded := proc.MemoryBreach()
	if !exceeded {
		return nil
	}
	h.logger.Warn("a contained pack was killed for its memory cap", "pack", p.Name, "type_id", typeID, "rule", sandbox.RuleMemory, "limit_bytes", limit)
	if h.onViolation != nil {
		h.onViolation(p.Name, wop.CodeSandboxMemoryExceeded)
	}
	return wop.Errorf(wop.CodeSandboxMemoryExceeded, "pack %s was killed for reaching its memory cap of %d bytes during the run of %s", p.Name, limit, typeID).
		WithDetails(map[string]any{"pack": p.Name, "typeId": typeID, "limitBytes": limit})
}

// logContainment says once, at start, how packs are contained and which
// rules this host cannot enforce.
func (h *Host) logContainment() {
	sb := h.cfg.Host.Sandbox
	if !sb.Enabled {
		h.logger.Warn("packs run uncontained: the host block's sandbox has enabled = false")
		return
	}
	if h.options.Launcher == "" {
		h.logger.Warn("packs run uncontained: the host was started without a launcher (an embedded host)")
		return
	}
	if ports := collectorPorts(h.opts.Tracing); len(ports) > 0 {
		h.logger.Warn("tracing is on: contained processes may open internet sockets to export their spans; TCP connects are held to the collector's port where Landlock has TCP rules (ABI 4), UDP is not filtered",
			"port", ports[0], "landlock_abi", h.sandbox.LandlockABI)
	}
	skipped := h.notEnforced(sb)
	if len(skipped) == 0 {
		h.logger.Info("packs are contained", "landlock_abi", h.sandbox.LandlockABI, "cgroups", h.sandbox.Cgroups())
		return
	}
	for _, r := range slices.Sorted(maps.Keys(skipped)) {
		h.logger.Warn("a sandbox rule is not enforced on this host", "rule", r, "reason", skipped[r])
	}
}

// ObserveSandbox has report called with the pack and the code of every
// run a contained pack failed for breaking a sandbox rule (a sandbox_*
// code). Call it before Start.
func (h *Host) ObserveSandbox(report func(pack, code string)) {
	h.onViolation = report
}

// noteViolation logs and reports a node's failure that the pack's SDK
// attributed to the sandbox.
func (h *Host) noteViolation(p *Pack, typeID string, err error) {
	code := wop.CodeOf(err)
	if !strings.HasPrefix(code, "sandbox_") {
		return
	}
	h.logger.Info("a contained pack broke a rule of its sandbox", "pack", p.Name, "type_id", typeID, "code", code, "error", err)
	if h.onViolation != nil {
		h.onViolation(p.Name, code)
	}
}
