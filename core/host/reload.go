package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/hostservices"
	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/core/packsign"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/tracing"
	"github.com/wophost/wophost/sdk/wop"
)

// ReloadRefusedError is Reload's answer when the new config would lose
// something the running host serves: a capability block it keeps that was
// ready and is not ready under the new config, or a pack it keeps that was
// admitted and is refused.
type ReloadRefusedError struct {
	// Lost names each capability and pack, with the reason.
	Lost []string
}

// Error implements error.
func (e *ReloadRefusedError) Error() string {
	return "the new config would lose what the running host serves: " + strings.Join(e.Lost, "; ")
}

// Reload starts the host that cfg describes beside h and returns it once
// it is ready to take over. A capability whose block, binary and host
// settings did not change keeps its running plugin: the new host takes the
// process over. One that changed gets a new process, started beside the
// old one, except when its plugin is single-writer: then the old process
// is drained (its calls in flight finish, new ones are refused as
// retryable) and stopped first. Packs always start anew beside the old
// ones.
//
// When the new host cannot serve (a config error, a required capability
// not ready) or would lose what h serves (*ReloadRefusedError), everything
// it took over goes back to h, what it stopped in h is started again, and
// h keeps serving. Otherwise the caller switches to the new host and then
// Closes h, which stops only what was not taken over.
func (h *Host) Reload(ctx context.Context, cfg *config.Config, files *config.Loader) (*Host, *Report, error) {
	before := h.serving()
	next := NewWithOptions(cfg, files, h.logger, h.opts.HostVersion, h.options)
	// A run in flight on h stays valid for the plugins next takes over.
	next.runs = h.runs
	if h.observer != nil {
		next.ObserveCalls(h.observer)
	}
	next.onViolation = h.onViolation
	next.prev = h
	rep := next.Start(ctx)
	next.prev = nil

	var err error
	if rep.Fatal() {
		err = fmt.Errorf("config %s:\n%s", cfg.Path, config.FormatDiagnostics(rep.Config))
	} else if lost := next.lost(before); len(lost) > 0 {
		err = &ReloadRefusedError{Lost: lost}
	}
	if err != nil {
		next.giveBack(h)
		next.Close()
		h.revive(next.retired)
		return nil, rep, err
	}
	// The calls held at the gates of the plugins stopped for their
	// replacement go to the replacements.
	for _, old := range next.retired {
		old.mu.Lock()
		gate := old.gate
		old.mu.Unlock()
		if gate == nil {
			continue
		}
		var successor registry.Invoker
		if c := next.capabilityNamed(old.cfg.Name); c != nil {
			c.mu.Lock()
			if c.gate != nil && !c.released {
				successor = c.gate
			}
			c.mu.Unlock()
		}
		gate.HandOver(successor)
	}
	// Agents spawned inline under h keep running in the agent runtime;
	// next checks their calls too.
	next.agents.CarryInline(h.agents)
	// From here on the plugins next took over call back into next.
	for _, c := range next.capabilities() {
		if c.adopted {
			if srv := c.hostServices(); srv != nil {
				srv.Rebind(next.router, next.agents.ByDigest)
			}
		}
	}
	return next, rep, nil
}

// servingSet is what a host serves at one moment: its ready capability
// blocks and its admitted packs.
type servingSet struct {
	capabilities map[string]bool
	packs        map[string]bool
}

func (h *Host) serving() servingSet {
	s := servingSet{capabilities: map[string]bool{}, packs: map[string]bool{}}
	for _, r := range h.reg.Records() {
		if r.State == registry.StateReady {
			s.capabilities[r.Name] = true
		}
	}
	for _, p := range h.Packs() {
		if p.State != PackRefused {
			s.packs[p.Name] = true
		}
	}
	return s
}

// lost lists what h, under its config, would no longer serve of before:
// blocks and packs both configs declare that served before and do not
// now. What the new config leaves out is not lost: the operator removed it.
// Neither is a pack whose signature no longer verifies: a reload
// re-verifies every pack so that a pack altered since it was signed (or
// no longer trusted) stops running, and keeping it would defeat that. It
// is refused with its reason while the rest of the reload goes ahead.
func (h *Host) lost(before servingSet) []string {
	var out []string
	for _, r := range h.reg.Records() {
		if before.capabilities[r.Name] && r.State != registry.StateReady {
			why := string(r.State)
			if r.LastError != "" {
				why += ": " + r.LastError
			}
			out = append(out, fmt.Sprintf("capability %q would not be ready (%s)", r.Name, why))
		}
	}
	for _, p := range h.Packs() {
		if before.packs[p.Name] && p.State == PackRefused {
			if h.refusedForSignature(p.Name) {
				h.logger.Warn("pack refused at the reload: its signature no longer verifies", "pack", p.Name, "error", p.Error)
				continue
			}
			out = append(out, fmt.Sprintf("pack %q would be refused (%s)", p.Name, p.Error))
		}
	}
	sort.Strings(out)
	return out
}

// refusedForSignature reports whether h refused the pack of that name
// with pack_signature_invalid.
func (h *Host) refusedForSignature(name string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, p := range h.packs {
		if p.Name == name {
			p.live.Lock()
			err := p.Err
			p.live.Unlock()
			return wop.CodeOf(err) == packsign.CodeSignatureInvalid
		}
	}
	return false
}

// takeOver returns the capabilities of h's config, in config order. With
// no previous host they are all new. On a reload, a capability the
// previous host runs unchanged is adopted, and the previous host's
// single-writer capabilities that changed are retired there first, so
// that two processes never share their state.
func (h *Host) takeOver(ctx context.Context) []*capability {
	caps := make([]*capability, len(h.cfg.Capabilities))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, cc := range h.cfg.Capabilities {
		caps[i] = &capability{cfg: cc}
		if h.prev == nil {
			continue
		}
		old := h.prev.capabilityNamed(cc.Name)
		if old == nil {
			continue
		}
		if c := h.adopt(old, cc); c != nil {
			caps[i] = c
			continue
		}
		if old.desc != nil && old.desc.SingleWriter {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.prev.retire(ctx, old)
				mu.Lock()
				h.retired = append(h.retired, old)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return caps
}

// adopt takes old's running process over when cc asks for exactly what it
// runs, and returns the new host's capability for it; nil otherwise.
func (h *Host) adopt(old *capability, cc *config.Capability) *capability {
	rec, ok := h.prev.reg.Record(cc.Name)
	if !ok || rec.State != registry.StateReady || old.fingerprint == "" {
		return nil
	}
	identity, err := loader.FileIdentity(cc.PluginPath)
	if err != nil {
		return nil
	}
	// The binary did not change, so neither did its schema.
	val, diags := config.DecodePluginConfig(cc, old.schema, h.files.EvalContext(h.cfg.Dir))
	if diags.HasErrors() || h.fingerprint(cc, identity, val) != old.fingerprint {
		return nil
	}
	old.mu.Lock()
	proc := old.proc
	if old.released || proc == nil || exited(proc) {
		old.mu.Unlock()
		return nil
	}
	old.released = true
	// direct_calls may have changed: it decides the grants, not the
	// process.
	ready := withGrants(old.ready, old.channel, cc)
	c := &capability{
		cfg: cc, sum: old.sum, desc: old.desc, schema: old.schema, config: val, families: old.families,
		identity: identity, fingerprint: old.fingerprint, adopted: true,
		proc: proc, ready: ready, services: old.services, channel: old.channel, crashes: slices.Clone(old.crashes),
	}
	old.mu.Unlock()
	c.gate = dispatch.NewGate(dispatch.Limit(proc, cc.MaxConcurrentCalls, cc.Name), cc.Name)
	h.reg.Adopt(cc.Name, rec, c.ready, c.gate)
	h.logger.Info("capability kept across the reload", "capability", cc.Name, "plugin", c.desc.Name, "version", c.desc.Version)
	return c
}

// giveBack returns every process h adopted to prev, which owns and
// supervises it again. A process that crashed and was restarted while h
// held it is re-advertised in prev's registry.
func (h *Host) giveBack(prev *Host) {
	for _, c := range h.capabilities() {
		if !c.adopted {
			continue
		}
		proc := c.release()
		old := prev.capabilityNamed(c.cfg.Name)
		if proc == nil || old == nil {
			continue
		}
		old.mu.Lock()
		old.released = false
		replaced := old.proc != proc
		var gate *dispatch.Gate
		var ready []registry.Family
		if replaced {
			gate = dispatch.NewGate(dispatch.Limit(proc, old.cfg.MaxConcurrentCalls, old.cfg.Name), old.cfg.Name)
			ready = withGrants(c.ready, c.channel, old.cfg)
			old.proc, old.gate, old.ready, old.channel = proc, gate, ready, c.channel
		}
		old.mu.Unlock()
		if replaced {
			prev.reg.Ready(old.cfg.Name, ready, gate)
			prev.watch(old, proc)
		}
	}
}

// retire drains c's process and stops it: the calls in flight finish (for
// up to the drain timeout) while new ones are refused as retryable. A
// restart of c in progress is waited for and undone.
func (h *Host) retire(ctx context.Context, c *capability) {
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		timeout := h.drainTimeout()
		dctx, cancel := context.WithTimeout(ctx, timeout)
		if err := gate.Close(dctx); err != nil {
			h.logger.Warn("calls still in flight to a plugin the reload replaces; stopping it anyway",
				"capability", c.cfg.Name, "in_flight", gate.InFlight(), "timeout", timeout)
		}
		cancel()
	}
	c.starting.Lock()
	c.stop()
	c.starting.Unlock()
	h.logger.Info("capability stopped for its replacement", "capability", c.cfg.Name)
}

// revive starts again the capabilities a refused reload retired.
func (h *Host) revive(caps []*capability) {
	for _, c := range caps {
		c.mu.Lock()
		c.released, c.proc = false, nil
		c.mu.Unlock()
		h.logger.Info("starting a capability again after the refused reload", "capability", c.cfg.Name)
		h.watchers.Add(1)
		go func() {
			defer h.watchers.Done()
			h.restart(c, 0)
		}()
	}
}

// drainTimeout is how long a reload waits for the calls in flight to a
// plugin it stops: the http block's shutdown_timeout.
func (h *Host) drainTimeout() time.Duration {
	if h.cfg.Host.HTTP != nil && h.cfg.Host.HTTP.ShutdownTimeout > 0 {
		return h.cfg.Host.HTTP.ShutdownTimeout
	}
	return config.DefaultShutdownTimeout
}

// fingerprint sums up what a plugin process runs with: its binary (path,
// file identity and pin), the block's family filter, its environment, its
// decoded config, its sandbox block, and the host settings every process
// is started with,
// storage included (a plugin's pool is opened with the dsn it was given).
// Settings that only the host applies (required, max_concurrent_calls,
// start_timeout) are left out: changing them does not need a new process.
func (h *Host) fingerprint(cc *config.Capability, identity string, configJSON []byte) string {
	sum := sha256.New()
	enc := json.NewEncoder(sum)
	// Encoding plain strings, ints and a settings struct cannot fail.
	_ = enc.Encode(struct {
		Path, Pin, Identity string
		Families            []string
		Env                 map[string]string
		Config              json.RawMessage
		StateDir            string
		LogLevel            string
		MaxMessageBytes     int
		Tracing             *tracing.Settings
		Storage             plugin.Storage
		// A channel's bound is set at Configure.
		DirectMaxUnreadBytes int
		// Containment is applied at start.
		Sandbox *config.Sandbox
		// The Go runtime reads it at start.
		GoMaxProcs int
	}{
		cc.PluginPath, cc.SHA256, identity, cc.Families, cc.Env, configJSON,
		h.cfg.Host.StateDir, h.opts.LogLevel.String(), h.opts.MaxMessageBytes, h.opts.Tracing,
		h.storageFor(cc), h.opts.DirectMaxUnreadBytes, cc.Sandbox, h.opts.GoMaxProcs,
	})
	return hex.EncodeToString(sum.Sum(nil))
}

// capabilityNamed returns h's capability of that block name, or nil.
func (h *Host) capabilityNamed(name string) *capability {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.caps[name]
}

// capabilities returns h's capabilities in no particular order.
func (h *Host) capabilities() []*capability {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*capability, 0, len(h.caps))
	for _, c := range h.caps {
		out = append(out, c)
	}
	return out
}

func (c *capability) hostServices() *hostservices.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.services
}

// exited reports whether proc has exited.
func exited(proc *loader.Capability) bool {
	select {
	case <-proc.Exited():
		return true
	default:
		return false
	}
}
