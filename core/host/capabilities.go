package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/hostservices"
	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/hostwire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/schema"
	"github.com/wophost/wophost/sdk/wop"
)

// capability is one declared capability block and its running plugin.
type capability struct {
	cfg    *config.Capability
	sum    []byte
	desc   *loader.Description
	schema schema.Block
	config []byte
	// families are the families this block serves, after the block's
	// `families` filter.
	families []loader.FamilyDescription
	// launchTook is how long starting and describing the plugin took, for
	// the start-up log.
	launchTook time.Duration
	// identity is the binary's loader.FileIdentity when it was started;
	// fingerprint sums up what the process runs with (see fingerprint).
	// A reload keeps the process while the fingerprint stays the same.
	identity    string
	fingerprint string
	// adopted is set when a reload took the process over from the
	// previous host rather than starting it.
	adopted bool
	// starting is held while a restart starts and configures a process,
	// so that a reload retiring the capability waits for it.
	starting sync.Mutex

	mu   sync.Mutex
	proc *loader.Capability
	// ready are the families as advertised once the process is
	// configured; gate is the way in to the process for this host's
	// registry; services is what the plugin calls back on (nil when it may
	// not call back).
	ready    []registry.Family
	gate     *dispatch.Gate
	services *hostservices.Server
	// channel is the process's direct channel, nil when it serves none;
	// ready's families carry it only when packs may use it (grantable).
	channel *registry.DirectChannel
	// released is set once this host no longer owns the process: it was
	// stopped, or a reload handed it to the next host, which supervises
	// and stops it from then on.
	released bool
	// waiting is set while proc refused its configuration for a reason
	// that may pass by itself and the host configures it again
	// (waiting.go); servedTo is the process services were handed to, so
	// that a further Configure of that process reuses them.
	waiting  bool
	servedTo *loader.Capability
	// crashes are the plugin's recent unexpected exits.
	crashes crashLog
	// killedFor is why the host killed proc itself (it stopped answering
	// its health checks), for the crash it then handles.
	killedFor error
}

// crashLog holds the times of recent crashes, for crash_limit.
type crashLog []time.Time

// add records a crash at now and returns how many fell within window.
func (l *crashLog) add(now time.Time, window time.Duration) int {
	recent := (*l)[:0]
	for _, t := range *l {
		if now.Sub(t) < window {
			recent = append(recent, t)
		}
	}
	*l = append(recent, now)
	return len(*l)
}

// crashed records a crash at now and reports how many fell within window.
func (c *capability) crashed(now time.Time, window time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashes.add(now, window)
}

func (c *capability) current() *loader.Capability {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc
}

// owns reports whether proc is c's process and c still owns it.
func (c *capability) owns(proc *loader.Capability) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.released && c.proc == proc
}

// release gives the process up and returns it, or nil when c had already
// given it up. Whoever gets it either stops it or owns it from then on.
func (c *capability) release() *loader.Capability {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return nil
	}
	c.released = true
	return c.proc
}

func (c *capability) isReleased() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.released
}

// stop stops the process unless c gave it up.
func (c *capability) stop() {
	if p := c.release(); p != nil {
		p.Kill()
	}
}

// startCapabilities runs every declared capability to ready or failed:
// start and describe in parallel, then the host-side checks that need
// every plugin's description, then configure in parallel.
func (h *Host) startCapabilities(ctx context.Context, rep *Report) {
	for _, cc := range h.cfg.Capabilities {
		h.reg.Declare(cc.Name, cc.PluginPath)
	}
	// On a reload, what did not change is taken over from the previous
	// host, and a single-writer plugin that did change is stopped there
	// before its successor starts (reload.go).
	caps := h.takeOver(ctx)
	h.mu.Lock()
	for _, c := range caps {
		h.caps[c.cfg.Name] = c
	}
	h.mu.Unlock()

	diags := make([]hcl.Diagnostics, len(caps))
	var wg sync.WaitGroup
	for i, c := range caps {
		if c.adopted {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			diags[i] = h.launch(ctx, c)
		}()
	}
	wg.Wait()
	for _, d := range diags {
		rep.Capabilities = append(rep.Capabilities, d...)
	}

	// The config blocks are decoded even when two plugins claim one
	// family, so that one run (host validate) reports their problems too;
	// nothing is configured then.
	rep.Config = append(rep.Config, h.checkClaims(caps)...)
	ectx := h.files.EvalContext(h.cfg.Dir)
	for i, c := range caps {
		diags[i] = nil
		if c.adopted || c.current() == nil {
			continue
		}
		val, d := config.DecodePluginConfig(c.cfg, c.schema, ectx)
		if d.HasErrors() {
			h.failCapability(c, registry.StateConfigured, errors.New(config.FormatDiagnostics(d)))
			diags[i] = d
			continue
		}
		c.config = val
		c.fingerprint = h.fingerprint(c.cfg, c.identity, val)
		h.logger.Debug("plugin config decoded", "capability", c.cfg.Name,
			"config", string(config.Redact(val, c.schema.SensitivePaths())))
	}
	if rep.Config.HasErrors() {
		for _, d := range diags {
			rep.Capabilities = append(rep.Capabilities, d...)
		}
		return
	}
	for i, c := range caps {
		if c.adopted || c.current() == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, _ := h.configure(ctx, c)
			diags[i] = append(diags[i], d...)
		}()
	}
	wg.Wait()
	for _, d := range diags {
		rep.Capabilities = append(rep.Capabilities, d...)
	}
	for _, c := range caps {
		if c.cfg.Required && c.isWaiting() {
			rep.Waiting = append(rep.Waiting, requiredWaiting(c))
			continue
		}
		if c.cfg.Required && !h.isReady(c.cfg.Name) {
			rep.Config = append(rep.Config, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Required capability is not ready",
				Detail:   fmt.Sprintf("Capability %q is marked required but did not become ready; see its error above.", c.cfg.Name),
				Subject:  c.cfg.DefRange.Ptr(),
			})
		}
	}
	for _, c := range caps {
		if p := c.current(); p != nil {
			h.watch(c, p)
			if c.isWaiting() {
				h.awaitConfigure(c, p)
			}
		}
	}
}

func (h *Host) isReady(name string) bool {
	for _, r := range h.reg.Records() {
		if r.Name == name {
			return r.State == registry.StateReady
		}
	}
	return false
}

// launch verifies, starts and describes one plugin. Failures are recorded
// in the registry and returned as diagnostics at the attribute concerned.
func (h *Host) launch(ctx context.Context, c *capability) hcl.Diagnostics {
	if d := config.CheckPlugin(c.cfg, h.cfg.Host.PluginDir); d != nil {
		h.reg.Fail(c.cfg.Name, registry.StateVerified, errors.New(d.Summary+": "+d.Detail))
		return hcl.Diagnostics{d}
	}
	exe, err := openPlugin(c.cfg)
	if err != nil {
		h.reg.Fail(c.cfg.Name, registry.StateVerified, err)
		rng, summary := c.cfg.PluginRange, "Plugin failed verification"
		var ce *loader.ChecksumError
		var we *loader.WritableError
		switch {
		case errors.As(err, &ce):
			rng = c.cfg.SHA256Range
		case errors.As(err, &we):
			summary = "Plugin is writable by others"
		}
		return capabilityDiag(c, summary, err, rng)
	}
	c.sum, c.identity = exe.Sum(), exe.Identity()
	h.reg.Advance(c.cfg.Name, registry.StateVerified)
	t0 := time.Now()
	proc, err := loader.StartCapability(c.cfg.Name, exe, h.processOptions(c.cfg))
	if err != nil {
		return h.phaseFailure(c, err, "Plugin failed to start")
	}
	h.reg.Advance(c.cfg.Name, registry.StateNegotiated)
	desc, err := proc.Describe(ctx)
	if err == nil {
		c.schema, err = proc.ConfigSchema(ctx)
	}
	if err != nil {
		proc.Kill()
		return h.phaseFailure(c, err, "Plugin failed to describe itself")
	}
	c.desc = desc
	c.launchTook = time.Since(t0)
	families, err := selectFamilies(c.cfg, desc)
	if err != nil {
		proc.Kill()
		h.reg.Fail(c.cfg.Name, registry.StateDescribed, err)
		return capabilityDiag(c, "Plugin does not serve what the config asks", err, c.cfg.DefRange)
	}
	c.families = families
	names := make([]string, len(families))
	for i, f := range families {
		names[i] = f.Name
	}
	h.reg.Describe(c.cfg.Name, desc.Name, desc.Version, names)
	c.mu.Lock()
	c.proc = proc
	c.mu.Unlock()
	return nil
}

func (h *Host) phaseFailure(c *capability, err error, summary string) hcl.Diagnostics {
	phase := registry.StateStarted
	var pe *loader.PhaseError
	if errors.As(err, &pe) {
		phase = registry.State(pe.Phase)
	}
	rng := c.cfg.PluginRange
	// go-plugin's check of the pin just before exec is the pin's problem.
	var ce *loader.ChecksumError
	if errors.As(err, &ce) {
		rng = c.cfg.SHA256Range
	}
	h.reg.Fail(c.cfg.Name, phase, located(rng, err))
	return capabilityDiag(c, summary, err, rng)
}

// located is err preceded by the place in the config it concerns, for
// the record that host plugins and GET /v1/plugins show without the
// diagnostic's snippet.
func located(rng hcl.Range, err error) error {
	return fmt.Errorf("%s: %w", config.FormatRange(rng), err)
}

func capabilityDiag(c *capability, summary string, err error, rng hcl.Range) hcl.Diagnostics {
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf("Capability %q (%s): %s", c.cfg.Name, c.cfg.PluginPath, err),
		Subject:  rng.Ptr(),
	}}
}

func (h *Host) failCapability(c *capability, phase registry.State, err error) {
	c.mu.Lock()
	proc, gate := c.proc, c.gate
	c.proc, c.waiting = nil, false
	c.mu.Unlock()
	if gate != nil && gate.Closed() {
		gate.HandOver(nil)
	}
	if proc != nil {
		proc.Kill()
	}
	h.reg.Fail(c.cfg.Name, phase, err)
}

// pluginDiagnostics converts what a plugin said about its config.
func pluginDiagnostics(in []loader.ConfigDiagnostic) []config.PluginDiagnostic {
	out := make([]config.PluginDiagnostic, len(in))
	for i, d := range in {
		out[i] = config.PluginDiagnostic{Summary: d.Summary, Detail: d.Detail, Path: d.Path}
	}
	return out
}

// restartOnce starts, describes and configures a new process for c. stop
// is set when c was given up meanwhile (a reload retired it): there is
// nothing to restart any more.
func (h *Host) restartOnce(c *capability) (proc *loader.Capability, stop bool, err error) {
	c.starting.Lock()
	defer c.starting.Unlock()
	if c.isReleased() {
		return nil, true, nil
	}
	// The binary is opened and checked afresh, and the process started
	// from what was checked, as at the first start.
	exe, err := openPlugin(c.cfg)
	if err != nil {
		return nil, false, &loader.PhaseError{Phase: string(registry.StateVerified), Err: err}
	}
	c.identity = exe.Identity()
	proc, err = loader.StartCapability(c.cfg.Name, exe, h.processOptions(c.cfg))
	if err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		proc.Kill()
		return nil, true, nil
	}
	c.proc = proc
	c.mu.Unlock()
	proc.Described(c.desc)
	// A process that waits for what it needs is up: it is configured
	// again by awaitConfigure, not restarted.
	if d, waiting := h.configure(context.Background(), c); d.HasErrors() && !waiting {
		return nil, false, errors.New(config.FormatDiagnostics(d))
	}
	return proc, false, nil
}

// openPlugin opens the capability's plugin binary and checks it: a
// regular executable file, not writable by others unless the block allows
// it, with the pinned sha256 if the block sets one.
func openPlugin(cc *config.Capability) (*loader.Executable, error) {
	return loader.OpenExecutable(cc.PluginPath, loader.Checks{SHA256: cc.SHA256, AllowWritable: cc.AllowWritable})
}

// processOptions are the options a capability's process is started with:
// the host's, with the block's start_timeout and environment.
func (h *Host) processOptions(cc *config.Capability) loader.Options {
	opts := h.opts
	opts.StartTimeout = cc.StartTimeout
	opts.Env = cc.Env
	opts.MaxConcurrentCalls = cc.MaxConcurrentCalls
	opts.Contain = h.pluginContainment(cc)
	return opts
}

// selectFamilies applies the block's `families` filter to what the plugin
// describes, and checks that every family name is well-formed.
func selectFamilies(cc *config.Capability, desc *loader.Description) ([]loader.FamilyDescription, error) {
	var out []loader.FamilyDescription
	described := map[string]bool{}
	for _, f := range desc.Families {
		described[f.Name] = true
		if !wop.IsCoreFamily(f.Name) {
			if ok, why := wop.ValidVendorFamily(f.Name); !ok {
				return nil, fmt.Errorf("plugin %s describes family %q: %s", desc.Name, f.Name, why)
			}
			// It is published under extensions, whose keys OpenWOP
			// spells org.name with exactly one dot.
			if strings.Count(f.Name, ".") != 1 {
				return nil, fmt.Errorf(`plugin %s describes family %q: a vendor family is "org.name" with exactly one dot`, desc.Name, f.Name)
			}
		}
		// The record is published as it is described: one OpenWOP
		// refuses is never advertised.
		if err := wop.CheckFamilyRecord(f.Status, f.Since, f.Until, f.Witness); err != nil {
			return nil, fmt.Errorf("plugin %s describes family %q with an invalid record: %w", desc.Name, f.Name, err)
		}
		// A replay trusts the declaration to run these methods live, so a
		// plugin (in any language) declaring what it does not serve, or
		// overriding the contract, is refused here.
		if err := checkPure(f); err != nil {
			return nil, fmt.Errorf("plugin %s describes family %q with %w", desc.Name, f.Name, err)
		}
		// The host and the plugin's channel hold every call to these.
		if err := admission.CheckFacetRules(f.Name, f.Methods, f.FacetRules); err != nil {
			return nil, fmt.Errorf("plugin %s describes family %q with %w", desc.Name, f.Name, err)
		}
		if len(cc.Families) == 0 || slices.Contains(cc.Families, f.Name) {
			out = append(out, f)
		}
	}
	var missing []string
	for _, want := range cc.Families {
		if !described[want] {
			missing = append(missing, want)
		}
	}
	if len(missing) > 0 {
		served := make([]string, 0, len(described))
		for f := range described {
			served = append(served, f)
		}
		sort.Strings(served)
		return nil, fmt.Errorf("plugin %s does not serve %s (it serves %s)", desc.Name, strings.Join(missing, ", "), strings.Join(served, ", "))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("plugin %s serves no family", desc.Name)
	}
	return out, nil
}

// checkPure returns why f's pure_methods cannot be taken: pure methods on
// a core family, whose the contract fixes, or one f does not list.
func checkPure(f loader.FamilyDescription) error {
	if len(f.PureMethods) > 0 && wop.IsCoreFamily(f.Name) {
		return fmt.Errorf("the pure method %q: the contract fixes the pure methods of a core family, which declares none", f.PureMethods[0])
	}
	for _, m := range f.PureMethods {
		if !slices.Contains(f.Methods, m) {
			return fmt.Errorf("the pure method %q, which is not one of its methods (%s)", m, strings.Join(f.Methods, ", "))
		}
	}
	return nil
}

// checkClaims refuses two capability blocks serving one family, naming
// both. It is a config error: which one would win is not the operator's
// intent.
func (h *Host) checkClaims(caps []*capability) hcl.Diagnostics {
	var diags hcl.Diagnostics
	owner := map[string]*capability{}
	for _, c := range caps {
		for _, f := range c.families {
			prev, ok := owner[f.Name]
			if !ok {
				owner[f.Name] = c
				continue
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Two plugins claim one family",
				Detail: fmt.Sprintf("Family %q is served by capability %q (%s, declared at %s) and by capability %q (%s). Restrict one of them with `families = [...]` or remove it.",
					f.Name, prev.cfg.Name, prev.cfg.PluginPath, config.FormatRange(prev.cfg.DefRange), c.cfg.Name, c.cfg.PluginPath),
				Subject: c.cfg.DefRange.Ptr(),
				Context: prev.cfg.DefRange.Ptr(),
			})
		}
	}
	return diags
}

// configure sends the decoded config and, on success, makes the plugin's
// families ready. waiting reports that the plugin refused it for a reason
// that may pass by itself: c is then waiting, its process kept, and the
// caller has awaitConfigure configure it again.
func (h *Host) configure(ctx context.Context, c *capability) (_ hcl.Diagnostics, waiting bool) {
	proc := c.current()
	stateDir := filepath.Join(h.cfg.Host.StateDir, "plugins", c.cfg.Name)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		err = fmt.Errorf("create state dir: %w", err)
		h.failCapability(c, registry.StateConfigured, err)
		return capabilityDiag(c, "Cannot prepare plugin state", err, c.cfg.DefRange), false
	}
	allowed := map[string]bool{}
	for _, f := range c.families {
		for _, n := range append(append([]string(nil), f.Needs...), f.Uses...) {
			allowed[n] = true
		}
	}
	// Only a plugin that may call back gets HostServices: an unused
	// broker listener only waits to time out.
	var hs wophostv1.HostServicesServer
	if len(allowed) > 0 {
		srv := hostservices.ForPlugin(h.router, h.runs, h.logger, c.cfg.Name, func(family, facet string) bool {
			return allowed[family] || (facet != "" && allowed[family+"."+facet])
		})
		// Only the agent runtime may call on behalf of an agent, and
		// its agents' calls are held to their manifests.
		for _, f := range c.families {
			if f.Name == wop.FamilyAgentRuntime {
				srv.ForAgents(h.agents.ByDigest)
			}
		}
		hs = srv
	}
	// A process configured again after it waited keeps calling back on
	// the services it was first given.
	send := hs
	if prev := c.servicesFor(proc); prev != nil {
		hs, send = prev, nil
	} else if srv, ok := hs.(*hostservices.Server); ok {
		c.handServices(proc, srv)
	}
	t0 := time.Now()
	res, err := proc.Configure(ctx, c.config, stateDir, h.storageFor(c.cfg), send, hostwire.FamilyRules(c.families))
	configureTook := time.Since(t0)
	if err != nil {
		// A process that went away during Configure was not refusing its
		// config: the block's plugin is at fault, in its own words.
		var exit *loader.ExitError
		if errors.As(err, &exit) {
			h.failCapability(c, registry.StateConfigured, located(c.cfg.PluginRange, err))
			return capabilityDiag(c, "Plugin exited before it was ready", err, c.cfg.PluginRange), false
		}
		if waitable(err, proc) {
			h.wait(c, proc, err)
			return capabilityDiag(c, "Plugin is waiting for what it needs", err, c.cfg.DefRange), true
		}
		h.failCapability(c, registry.StateConfigured, err)
		return capabilityDiag(c, "Plugin refused its configuration", err, c.cfg.ConfigRange), false
	}
	if len(res.Diagnostics) > 0 {
		diags := config.PluginDiagnostics(c.cfg, pluginDiagnostics(res.Diagnostics))
		h.failCapability(c, registry.StateConfigured, errors.New(config.FormatDiagnostics(diags)))
		return diags, false
	}
	// The facets are published as they are reported: a core family's
	// record OpenWOP refuses is never advertised.
	if err := checkFacets(c.desc.Name, c.families, res.Facets); err != nil {
		h.failCapability(c, registry.StateConfigured, err)
		return capabilityDiag(c, "Plugin reports facets the host cannot advertise", err, c.cfg.DefRange), false
	}
	// Warnings are reported where they point and listed with the
	// capability; the plugin serves anyway.
	warnings := config.PluginWarnings(c.cfg, pluginDiagnostics(res.Warnings))
	notes := make([]string, len(warnings))
	for i, w := range warnings {
		notes[i] = w.Summary + ": " + w.Detail + " (" + config.FormatRange(*w.Subject) + ")"
	}
	h.reg.Warn(c.cfg.Name, notes)
	var channel *registry.DirectChannel
	if res.Direct != nil {
		channel = &registry.DirectChannel{Endpoint: res.Direct.Endpoint, Key: res.Direct.Key, EndRun: proc.EndRun}
	}
	direct := grantable(channel, c.cfg)
	families := make([]registry.Family, 0, len(c.families))
	for _, f := range c.families {
		families = append(families, registry.Family{
			Name: f.Name, Status: f.Status, Since: f.Since, Until: f.Until, Witness: f.Witness,
			Methods: f.Methods, Needs: f.Needs, Uses: f.Uses, Pure: f.PureMethods, Rules: admission.Rules{Facets: f.FacetRules},
			Facets: res.Facets[f.Name], Details: res.Details[f.Name],
			Direct: direct,
		})
	}
	srv, _ := hs.(*hostservices.Server)
	gate := dispatch.NewGate(dispatch.Limit(proc, c.cfg.MaxConcurrentCalls, c.cfg.Name), c.cfg.Name)
	c.mu.Lock()
	prevGate := c.gate
	c.ready, c.gate, c.services, c.waiting, c.channel = families, gate, srv, false, channel
	c.mu.Unlock()
	if prevGate != nil && prevGate.Closed() {
		// The calls held while a refused reload had the plugin stopped go
		// to its new process.
		prevGate.HandOver(gate)
	}
	h.reg.Advance(c.cfg.Name, registry.StateConfigured)
	h.reg.Ready(c.cfg.Name, families, gate)
	h.logger.Info("capability ready", "capability", c.cfg.Name, "plugin", c.desc.Name, "version", c.desc.Version,
		"started_in", c.launchTook.Round(time.Millisecond), "configured_in", configureTook.Round(time.Millisecond))
	return warnings, false
}

// grantable is the channel packs get grants to under cc: none when the
// block keeps their calls on the routed path (direct_calls = false). The
// host's own calls to the plugin take the channel either way.
func grantable(channel *registry.DirectChannel, cc *config.Capability) *registry.DirectChannel {
	if !cc.DirectCalls {
		return nil
	}
	return channel
}

// withGrants returns a copy of families whose channel for packs' grants
// is grantable(channel, cc).
func withGrants(families []registry.Family, channel *registry.DirectChannel, cc *config.Capability) []registry.Family {
	out := slices.Clone(families)
	for i := range out {
		out[i].Direct = grantable(channel, cc)
	}
	return out
}

// watch waits for the plugin process to exit. An exit the host did not
// ask for withdraws the families and starts the restart loop. Meanwhile
// it checks the process's health (checkHealth).
func (h *Host) watch(c *capability, proc *loader.Capability) {
	h.watchers.Add(2)
	go func() {
		defer h.watchers.Done()
		h.checkHealth(healthTarget{
			kind: "plugin", key: "capability", name: c.cfg.Name,
			check: proc.CheckHealth, exited: proc.Exited(),
			owned: func() bool { return c.owns(proc) },
			kill: func(why error) {
				c.mu.Lock()
				c.killedFor = why
				c.mu.Unlock()
				proc.Abort()
			},
		})
	}()
	go func() {
		defer h.watchers.Done()
		select {
		case <-proc.Exited():
		case <-h.done:
			// Close stops the process; a process handed to the next host
			// is that host's to watch.
			return
		}
		if h.isClosing() || !c.owns(proc) {
			return
		}
		c.mu.Lock()
		why := c.killedFor
		c.killedFor = nil
		c.mu.Unlock()
		if why == nil {
			why = exitedUnexpectedly("plugin", proc.LastWords())
			h.logger.Error("plugin exited unexpectedly", "capability", c.cfg.Name, "error", why)
		}
		h.reg.Crash(c.cfg.Name, why)
		// The process is gone, but its client side (the gRPC connection,
		// the broker) is not until it is killed.
		proc.Kill()
		limit, window := h.cfg.Host.CrashLimit, h.cfg.Host.CrashWindow
		if n := c.crashed(time.Now(), window); n >= limit {
			h.failCapability(c, registry.StateCrashed,
				fmt.Errorf("crashed %d times within %s (crash_limit = %d); not restarted until the host restarts or reloads", n, window, limit))
			return
		}
		h.restart(c, h.options.Restart.Base)
	}()
}

// restart brings a crashed plugin back: a new process, described and
// configured again with the same config, then re-advertised. The first
// attempt waits delay.
func (h *Host) restart(c *capability, delay time.Duration) {
	policy := h.options.Restart
	var last error
	for n := 1; n <= policy.Attempts; n++ {
		h.reg.Restarting(c.cfg.Name)
		// Close must not wait out a backoff.
		select {
		case <-policy.After(delay):
		case <-h.done:
			return
		}
		delay = policy.next(delay)
		proc, stop, err := h.restartOnce(c)
		if stop {
			return
		}
		if err != nil {
			h.logger.Warn("plugin restart failed", "capability", c.cfg.Name, "attempt", n, "error", err)
			last = err
			continue
		}
		h.watch(c, proc)
		if c.isWaiting() {
			h.awaitConfigure(c, proc)
		}
		return
	}
	h.failCapability(c, registry.StateRestarting, gaveUp(policy.Attempts, last))
}
