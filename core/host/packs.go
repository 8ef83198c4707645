package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"

	"github.com/wophost/wophost/core/agents"
	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/hostservices"
	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/core/packsign"
	"github.com/wophost/wophost/core/wasm"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/wop"
)

// PackState is how a pack loaded.
type PackState string

// Pack states. A pack is refused at load, or admitted as ready or
// degraded; an admitted pack whose process exits is crashed, then
// restarting, and back to ready or degraded, or failed once the host gives
// up on it (packwatch.go). Its nodes run only while it is ready or
// degraded.
const (
	PackReady      PackState = "ready"
	PackDegraded   PackState = "degraded"
	PackRefused    PackState = "refused"
	PackCrashed    PackState = "crashed"
	PackRestarting PackState = "restarting"
	PackFailed     PackState = "failed"
)

// Pack is one declared pack. Once the host admitted it, its process,
// state and error change only under live.
type Pack struct {
	Name     string
	Path     string
	State    PackState
	Version  string
	TypeIDs  []string
	Degraded []string
	// Notes are the OpenWOP features of the pack's manifest that the
	// host reads without acting on.
	Notes []packmanifest.Note
	Err   error
	// SignedBy is the trusted key the pack's signature verified with; ""
	// for an unsigned pack.
	SignedBy string

	cfg      *config.Pack
	manifest *packmanifest.Manifest
	// raw is pack.json as read, and entry the binary's path: a restarted
	// binary must still carry the same manifest.
	raw          []byte
	entry        string
	hostServices *hostservices.Server
	// agents are the pack's checked agent manifests, installed into the
	// host's registry once every pack has loaded.
	agents []*agents.Entry

	live sync.Mutex
	proc *loader.Pack
	// module is a WebAssembly pack's compiled module, which the host runs
	// in process; such a pack has no proc.
	module *wasm.Module
	// served is the process HostServices was served to: the host serves
	// it at a process's first run, since a broker listener nobody dials
	// only waits to time out.
	served *loader.Pack
	// restarts counts restart attempts since the host started; crashes
	// are the times of recent unexpected exits.
	restarts int
	crashes  crashLog
	// killedFor is why the host killed proc itself (it stopped answering
	// its health checks), for the crash it then handles.
	killedFor error
}

// PackInfo is what `host packs` shows of a pack.
type PackInfo struct {
	Name     string    `json:"name"`
	Version  string    `json:"version,omitempty"`
	Path     string    `json:"path"`
	State    PackState `json:"state"`
	Nodes    []string  `json:"nodes,omitempty"`
	Agents   []string  `json:"agents,omitempty"`
	Degraded []string  `json:"degraded,omitempty"`
	// Notes are the OpenWOP features the pack uses that the host does not
	// act on, each with what that means.
	Notes []packmanifest.Note `json:"notes,omitempty"`
	// SignedBy is the id of the trusted key the pack's signature verified
	// with; absent for an unsigned pack.
	SignedBy string `json:"signedBy,omitempty"`
	Error    string `json:"error,omitempty"`
	// Restarts counts the restarts of the pack's process since the host
	// started.
	Restarts int `json:"restarts"`
	// Sandbox is the pack's containment; absent for a WebAssembly pack,
	// which no process holds.
	Sandbox *PackSandbox `json:"sandbox,omitempty"`
	// Runtime is the pack's runtime.language: "wasm" for a WebAssembly
	// pack, whose module Wasm describes.
	Runtime string    `json:"runtime,omitempty"`
	Wasm    *PackWasm `json:"wasm,omitempty"`
	// Runs says how the host sends node runs to the pack's process:
	// "channel" on the pack's execute channel, "grpc" on its gRPC
	// connection (direct_channels off, or a pack that serves no
	// channel); absent while no process runs.
	Runs string `json:"runs,omitempty"`
}

// Packs lists every declared pack in declaration order.
func (h *Host) Packs() []PackInfo {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]PackInfo, 0, len(h.packs))
	for _, p := range h.packs {
		p.live.Lock()
		info := PackInfo{Name: p.Name, Version: p.Version, Path: p.Path, State: p.State, Nodes: p.TypeIDs, Degraded: p.Degraded, Notes: p.Notes, SignedBy: p.SignedBy, Restarts: p.restarts}
		for _, a := range p.agents {
			info.Agents = append(info.Agents, a.ID)
		}
		if p.Err != nil {
			info.Error = p.Err.Error()
		}
		if p.manifest != nil {
			info.Runtime = p.manifest.Runtime.Language
		}
		if info.Wasm = packWasmInfo(p); info.Wasm == nil && (p.manifest == nil || !p.manifest.IsWasm()) {
			info.Sandbox = h.packSandboxInfo(p)
		}
		switch {
		case p.proc == nil:
		case p.proc.ExecuteChannel():
			info.Runs = "channel"
		default:
			info.Runs = "grpc"
		}
		p.live.Unlock()
		out = append(out, info)
	}
	return out
}

// launchPacks checks every configured pack's files and starts its binary,
// in the background: the host starts packs while its plugins start, since
// nothing of this depends on what the plugins advertise. startPacks
// finishes the job once they are ready.
func (h *Host) launchPacks(ctx context.Context) (packs []*Pack, launched *sync.WaitGroup) {
	packs = make([]*Pack, len(h.cfg.Packs))
	launched = &sync.WaitGroup{}
	for i, pc := range h.cfg.Packs {
		p := &Pack{Name: pc.Name, Path: pc.Path, cfg: pc}
		packs[i] = p
		launched.Add(1)
		go func() {
			defer launched.Done()
			if err := h.launchPack(ctx, p); err != nil {
				h.refusePack(p, err)
			}
		}()
	}
	return packs, launched
}

// refusePack records why p is refused and stops its process, if any.
func (h *Host) refusePack(p *Pack, err error) {
	p.State, p.Err, p.Degraded = PackRefused, err, nil
	p.stopRuntime()
}

// stopRuntime stops what runs p's nodes: kills its process, or closes its
// module and the instances kept ready.
func (p *Pack) stopRuntime() {
	if p.proc != nil {
		p.proc.Kill()
		p.proc = nil
	}
	if p.module != nil {
		// Closing a module only releases memory; it cannot fail in a way
		// that leaves anything running.
		_ = p.module.Close(context.Background())
		p.module = nil
	}
}

// startPacks waits for the packs launchPacks started, admits each against
// the advertisement (in parallel) and registers the ones admitted.
func (h *Host) startPacks(ctx context.Context, rep *Report, packs []*Pack, launched *sync.WaitGroup) {
	launched.Wait()
	var wg sync.WaitGroup
	for _, p := range packs {
		// A missing peer is the first thing an operator needs to hear of,
		// even when the binary could not start either; but a pack whose
		// signature failed is not what its author wrote, so that comes
		// first, and what it would degrade without is moot.
		if p.manifest != nil && wop.CodeOf(p.Err) != packsign.CodeSignatureInvalid {
			if err := h.checkPeers(p); err != nil {
				h.refusePack(p, err)
			}
			if p.State == PackRefused {
				p.Degraded = nil
			}
		}
		if p.State == PackRefused {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.admitPack(ctx, p); err != nil {
				h.refusePack(p, err)
			}
		}()
	}
	wg.Wait()

	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range packs {
		if p.State == PackRefused {
			rep.Packs = append(rep.Packs, packRefused(p, fmt.Sprintf("Pack %q (%s): %s", p.Name, p.Path, p.Err)))
		}
		if p.State != PackRefused {
			for _, id := range p.TypeIDs {
				if other, dup := h.byTypeID[id]; dup {
					p.State = PackRefused
					p.Err = wop.Errorf(wop.CodePackValidationFailed, "node %q is also served by pack %s", id, other.Name)
					rep.Packs = append(rep.Packs, packRefused(p, fmt.Sprintf("Pack %q: %s", p.Name, p.Err)))
					break
				}
			}
		}
		if p.State != PackRefused && len(p.agents) > 0 {
			if err := h.agents.Install(p.agents); err != nil {
				p.State, p.Err = PackRefused, err
				rep.Packs = append(rep.Packs, packRefused(p, fmt.Sprintf("Pack %q: %s", p.Name, err)))
			}
		}
		if p.State == PackRefused {
			p.stopRuntime()
		} else {
			for _, id := range p.TypeIDs {
				h.byTypeID[id] = p
			}
			h.watchPack(p, p.proc)
			if len(p.Notes) > 0 {
				rep.Packs = append(rep.Packs, packNotes(p))
			}
		}
		h.packs = append(h.packs, p)
	}
	h.advertiseWasm(h.packs)
}

// packRefused is the diagnostic of a refused pack.
func packRefused(p *Pack, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Pack refused", Detail: detail, Subject: p.cfg.DefRange.Ptr()}
}

// packNotes is the warning listing the OpenWOP features an admitted pack
// uses that the host does not act on: the pack works, but not entirely as
// its author may expect elsewhere.
func packNotes(p *Pack) *hcl.Diagnostic {
	lines := make([]string, len(p.Notes))
	for i, n := range p.Notes {
		lines[i] = "  " + n.String()
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagWarning,
		Summary:  "Pack uses OpenWOP features this host does not act on",
		Detail:   fmt.Sprintf("Pack %q (%s):\n%s", p.Name, p.Path, strings.Join(lines, "\n")),
		Subject:  p.cfg.DefRange.Ptr(),
	}
}

// launchPack reads and validates pack.json, verifies its signature by the
// config's trust (packsign.Verify), then starts the binary, checking the
// signed digest on it first, and checks its embedded manifest against
// the file.
func (h *Host) launchPack(ctx context.Context, p *Pack) error {
	if d := config.CheckPackDir(p.cfg); d != nil {
		return wop.Errorf(wop.CodePackValidationFailed, "%s: %s", d.Summary, d.Detail)
	}
	// The signature is checked before any other file of the pack is read,
	// so that a file changed since signing is refused as that.
	m, raw, err := packmanifest.Read(p.Path)
	if err != nil {
		return err
	}
	p.manifest, p.Version, p.raw, p.Notes = m, m.Version, raw, m.Notes
	if m.Name != p.Name {
		return wop.Errorf(wop.CodePackValidationFailed, "pack.json names the pack %q, the config block %q", m.Name, p.Name)
	}
	verified, err := packsign.Verify(p.Path, raw, m, h.cfg.SigningKeys(), p.cfg.RequireSignature)
	if err != nil {
		return err
	}
	if verified != nil {
		p.SignedBy = verified.KeyID
	}
	if err := m.LoadSchemas(p.Path); err != nil {
		// A pack whose schemas do not compile is refused for that, not
		// checked against the advertisement (startPacks).
		p.manifest = nil
		return err
	}
	for _, n := range m.Nodes {
		p.TypeIDs = append(p.TypeIDs, n.TypeID)
	}
	// Refused at load, before anything runs (OpenWOP RFC 0076). A
	// WebAssembly pack's are checked against what a module can reach
	// (loadWasmPack): no process sandbox holds it.
	if !m.IsWasm() {
		if err := h.checkRuntimeRequirements(p); err != nil {
			return err
		}
	}
	p.entry = filepath.Join(p.Path, filepath.FromSlash(m.Runtime.Entry))
	if m.IsWasm() {
		return h.loadWasmPack(ctx, p)
	}
	proc, err := h.startPackProcess(ctx, p)
	p.proc = proc
	return err
}

// startPackProcess opens p's entry binary inside the pack directory,
// checks it, starts the process from the opened file and checks that the
// binary was built with the pack.json the host read. The process is
// returned also when the last check fails, for the caller to stop.
//
// A pack.json carrying the entry's digest (packmanifest.EntrySHA256Key)
// pins the binary: it is checked on the opened file, and again when the
// process is started from it. For a signed pack a mismatch is
// pack_signature_invalid, the binary not being the one signed.
func (h *Host) startPackProcess(ctx context.Context, p *Pack) (*loader.Pack, error) {
	exe, err := loader.OpenPackEntry(p.Path, p.manifest.Runtime.Entry, loader.Checks{AllowWritable: p.cfg.AllowWritable, SHA256: p.manifest.EntrySHA256})
	if err != nil {
		if d := p.digestMismatch(err); d != nil {
			return nil, d
		}
		return nil, wop.Errorf(wop.CodePackValidationFailed, "runtime.entry: %v", err)
	}
	opts := h.opts
	opts.Env = p.cfg.Env
	opts.Contain = h.packContainment(p)
	proc, err := loader.StartPack(p.Name, exe, opts)
	if err != nil {
		if d := p.digestMismatch(err); d != nil {
			return nil, d
		}
		return nil, fmt.Errorf("start pack binary: %w", err)
	}
	embedded, err := proc.Manifest(ctx)
	if err != nil {
		return proc, fmt.Errorf("read the binary's manifest: %w", err)
	}
	if !sameManifest(p.raw, embedded) {
		return proc, wop.Errorf(wop.CodePackValidationFailed, "the binary %s was built with a different pack.json than %s; rebuild it", p.entry, filepath.Join(p.Path, config.PackManifest))
	}
	if h.opts.DirectChannels {
		// Runs go on the pack's own framing rather than a gRPC round
		// trip, and stay on gRPC when the pack cannot serve them so.
		if err := proc.OpenExecuteChannel(ctx); err != nil {
			h.logger.Warn("pack runs its nodes on gRPC: no execute channel", "pack", p.Name, "error", err)
		}
	}
	return proc, nil
}

// digestMismatch is the refusal of p when err is its entry binary not
// matching the digest pack.json pins, nil for any other error.
func (p *Pack) digestMismatch(err error) error {
	var ce *loader.ChecksumError
	if !errors.As(err, &ce) {
		return nil
	}
	if p.SignedBy != "" {
		return packsign.DigestMismatch(p.Name, p.SignedBy, ce.Path, ce.Expected, ce.Actual)
	}
	return wop.Errorf(wop.CodePackValidationFailed, "runtime.entry: the binary %s is not the one pack.json's %s names: its sha256 is %s, not %s",
		ce.Path, packmanifest.EntrySHA256Key, ce.Actual, ce.Expected)
}

// checkPeers refuses a pack whose required peer dependencies are not
// advertised, and notes the optional ones that are not.
func (h *Host) checkPeers(p *Pack) error {
	var missing, degraded []string
	for _, r := range p.manifest.PeerRequirements() {
		if h.reg.Has(r.Family, r.Facet) {
			continue
		}
		name := r.Family
		if r.Facet != "" {
			name += "." + r.Facet
		}
		if r.Optional {
			degraded = append(degraded, name)
		} else {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return wop.Errorf(wop.CodePackPeerDependencyMissing, "required peer dependencies are not advertised: %s", strings.Join(missing, ", ")).
			WithDetails(map[string]any{"missing": missing})
	}
	sort.Strings(degraded)
	p.Degraded = degraded
	return nil
}

// admitPack checks a launched pack's prompt pins and installs its agents,
// refusing the pack when a pin names what the store does not hold or the
// agents do not pass the install checks, and makes it ready (or degraded,
// without an optional peer).
func (h *Host) admitPack(ctx context.Context, p *Pack) error {
	if err := h.checkPromptPins(ctx, p); err != nil {
		return err
	}
	if agents := p.manifest.Agents; len(agents) > 0 {
		if !h.reg.Has(wop.FamilyAgents, agentruntime.FacetManifestRuntime) {
			// Never skip a tier silently: the pack loads degraded and says
			// why (a pack that requires the runtime was refused already).
			h.logger.Warn("pack's agents not installed: agents.manifestRuntime is not advertised", "pack", p.Name, "agents", len(agents))
			if !slices.Contains(p.Degraded, manifestRuntimeTier) {
				p.Degraded = append(p.Degraded, manifestRuntimeTier)
				sort.Strings(p.Degraded)
			}
		} else {
			var err error
			if p.agents, err = h.agentCheck.CheckPack(ctx, p.Name, agents); err != nil {
				return err
			}
		}
	}
	p.hostServices = hostservices.ForPack(h.router, h.runs, h.logger, p.Name)
	p.State = PackReady
	if len(p.Degraded) > 0 {
		p.State = PackDegraded
		h.logger.Info("pack loaded degraded", "pack", p.Name, "missing_optional", strings.Join(p.Degraded, ", "))
	}
	return nil
}

// manifestRuntimeTier is what a pack with agents misses while the host
// does not advertise agents.manifestRuntime.
const manifestRuntimeTier = wop.FamilyAgents + "." + agentruntime.FacetManifestRuntime

// sameManifest compares pack.json with the copy embedded in the binary,
// ignoring what is written into pack.json after the binary was built: the
// prompt lock map (packmanifest.PromptsKey), which the operator rewrites
// with `host prompts lock` to pin prompts to new versions without a
// rebuild, and what signing adds, the signing block and the digests of the
// binary and the pack's files (packmanifest.EntrySHA256Key and FilesKey),
// which no binary can embed.
func sameManifest(file, embedded []byte) bool {
	if sameJSON(file, embedded) {
		return true
	}
	var a, b map[string]json.RawMessage
	if json.Unmarshal(file, &a) != nil || json.Unmarshal(embedded, &b) != nil {
		return false
	}
	for _, k := range []string{packmanifest.PromptsKey, packmanifest.EntrySHA256Key, packmanifest.FilesKey, "signing"} {
		delete(a, k)
		delete(b, k)
	}
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && sameJSON(ja, jb)
}

// sameJSON reports whether a and b hold equal JSON values, so that
// formatting differences between the file and the embedded copy (line
// endings, indentation) do not matter.
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
