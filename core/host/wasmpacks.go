package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/core/wasm"
	"github.com/wophost/wophost/sdk/wop"
)

// Error codes of WebAssembly packs, as OpenWOP names them (RFC 0008).
const (
	// CodeUnsupportedABIVersion refuses, at load, a module whose
	// openwop_abi_version() is not one the host serves.
	CodeUnsupportedABIVersion = "unsupported_abi_version"
	// CodeCapBreached fails a run stopped by one of its pack's caps;
	// details are {kind, limit, observed}, kind "wasm-memory" (bytes) or
	// "wasm-execution-time" (milliseconds).
	CodeCapBreached = "cap.breached"
	// CodeWasmInvocationFailed fails a run whose module trapped or
	// answered no valid response envelope.
	CodeWasmInvocationFailed = "wasm_invocation_failed"
	// CodeSuspendNotSupported fails a run whose node suspended: the host
	// runs single nodes and has no one to resume them.
	CodeSuspendNotSupported = "suspend_not_supported"
)

// RecordNodePackRuntimes is the root record of the discovery document
// that says which pack runtimes the host runs besides processes.
const RecordNodePackRuntimes = "nodePackRuntimes"

// wasmCacheDir is where, under state_dir, compiled modules are kept
// between starts.
const wasmCacheDir = "wasm-cache"

// wasmEngine returns the host's WebAssembly engine, made with the first
// WebAssembly pack. Its compilation cache lives under state_dir, so that
// a restart does not compile the modules again; without a usable state
// directory it is kept in memory.
func (h *Host) wasmEngine() (*wasm.Engine, error) {
	h.wasmOnce.Do(func() {
		dir := filepath.Join(h.cfg.Host.StateDir, wasmCacheDir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			h.logger.Warn("WebAssembly modules are compiled at every start: the compilation cache cannot be kept", "dir", dir, "error", err)
			dir = ""
		}
		h.wasm, h.wasmErr = wasm.NewEngine(dir, h.logger.Named("wasm"))
		if h.wasmErr != nil && dir != "" {
			h.logger.Warn("WebAssembly modules are compiled at every start: the compilation cache cannot be used", "dir", dir, "error", h.wasmErr)
			h.wasm, h.wasmErr = wasm.NewEngine("", h.logger.Named("wasm"))
		}
	})
	return h.wasm, h.wasmErr
}

// closeWasm closes the engine, if one was made, once every pack closed
// its module.
func (h *Host) closeWasm(ctx context.Context) {
	if h.wasm == nil {
		return
	}
	if err := h.wasm.Close(ctx); err != nil {
		h.logger.Warn("closing the WebAssembly engine", "error", err)
	}
}

// loadWasmPack reads p's module, compiles it and checks it against
// pack.json: its ABI version is one the host serves, it names the same
// pack and serves exactly the nodes pack.json lists. The digest pack.json
// pins is checked on the bytes compiled.
func (h *Host) loadWasmPack(ctx context.Context, p *Pack) error {
	m := p.manifest
	if unmet := wasmUnmet(m.Runtime.Requires); len(unmet) > 0 {
		return wop.Errorf(wop.CodePackRuntimeRequirementUnmet,
			"runtime.requires lists %s, which no WebAssembly pack can have: a module reaches nothing but the host's imports", strings.Join(unmet, ", ")).
			WithDetails(map[string]any{"unmet": unmet, "manifest": p.Name + "@" + p.Version})
	}
	data, err := loader.ReadPackModule(p.Path, m.Runtime.Entry, loader.Checks{AllowWritable: p.cfg.AllowWritable, SHA256: m.EntrySHA256})
	if err != nil {
		if d := p.digestMismatch(err); d != nil {
			return d
		}
		return wop.Errorf(wop.CodePackValidationFailed, "runtime.entry: %v", err)
	}
	eng, err := h.wasmEngine()
	if err != nil {
		return fmt.Errorf("start the WebAssembly engine: %w", err)
	}
	mod, err := eng.Load(ctx, data, wasm.LoadOptions{
		Limits:        wasm.Limits{MaxMemoryBytes: p.cfg.Wasm.MaxMemoryBytes, MaxExecution: p.cfg.Wasm.MaxExecution},
		WarmInstances: p.cfg.Wasm.WarmInstances,
		Logger:        h.logger.Named(p.Name),
	})
	if err != nil {
		var abi *wasm.ABIError
		if errors.As(err, &abi) {
			return wop.Errorf(CodeUnsupportedABIVersion, "runtime.entry: %v", err).
				WithDetails(map[string]any{"reported": abi.Reported, "served": abi.Served})
		}
		return wop.Errorf(wop.CodePackValidationFailed, "runtime.entry: %v", err)
	}
	if msg := moduleMismatch(mod, m); msg != "" {
		if cerr := mod.Close(ctx); cerr != nil {
			h.logger.Debug("closing a refused module", "pack", p.Name, "error", cerr)
		}
		return wop.Errorf(wop.CodePackValidationFailed, "runtime.entry: the module %s was built for another pack.json: %s; rebuild it", filepath.Join(p.Path, m.Runtime.Entry), msg)
	}
	p.module = mod
	return nil
}

// wasmUnmet lists the runtime requirements no module can have. A module
// computes (crypto) and reads the host's clock through openwop_now_ms
// (clock); the network, files, processes and the environment are out of
// its reach.
func wasmUnmet(requires []string) []string {
	var unmet []string
	for _, r := range requires {
		if r != "crypto" && r != "clock" {
			unmet = append(unmet, r)
		}
	}
	return unmet
}

// moduleMismatch says how the module's own account of its pack differs
// from pack.json's, "" when it does not.
func moduleMismatch(mod *wasm.Module, m *packmanifest.Manifest) string {
	var problems []string
	if mod.PackName() != m.Name {
		problems = append(problems, fmt.Sprintf("openwop_pack_name() is %q, pack.json's name %q", mod.PackName(), m.Name))
	}
	var declared []string
	for _, n := range m.Nodes {
		declared = append(declared, n.TypeID)
	}
	served := mod.NodeIDs()
	var missing, extra []string
	for _, id := range declared {
		if !slices.Contains(served, id) {
			missing = append(missing, id)
		}
	}
	for _, id := range served {
		if !slices.Contains(declared, id) {
			extra = append(extra, id)
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "it serves no node "+strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		problems = append(problems, "it serves "+strings.Join(extra, ", ")+", which pack.json does not list")
	}
	return strings.Join(problems, "; ")
}

// PackWasm is what `host packs` shows of a WebAssembly pack's module.
type PackWasm struct {
	ABIVersion int `json:"abiVersion"`
	// Encoding is how the module returns pointer and length pairs:
	// "multi-value" or "packed-i64".
	Encoding string `json:"encoding"`
	// Extension says the module imports wophost's host-service calls.
	Extension      bool  `json:"extension"`
	MaxMemoryBytes int64 `json:"maxMemoryBytes"`
	MaxExecutionMs int64 `json:"maxExecutionMs"`
	WarmInstances  int   `json:"warmInstances"`
}

// packWasmInfo describes p's module; nil for a process pack or a module
// not loaded.
func packWasmInfo(p *Pack) *PackWasm {
	if p.module == nil {
		return nil
	}
	l := p.module.Limits()
	return &PackWasm{
		ABIVersion: p.module.ABIVersion(), Encoding: p.module.Encoding(), Extension: p.module.UsesExtension(),
		MaxMemoryBytes: l.MaxMemoryBytes, MaxExecutionMs: l.MaxExecution.Milliseconds(), WarmInstances: p.cfg.Wasm.WarmInstances,
	}
}

// advertiseWasm sets the nodePackRuntimes record: the ABI versions the
// host serves, the memory cap it enforces by default, and the
// WebAssembly packs loaded, which a refused pack never joins.
func (h *Host) advertiseWasm(packs []*Pack) {
	loaded := []string{}
	for _, p := range packs {
		if p.module != nil && p.State != PackRefused {
			loaded = append(loaded, p.Name)
		}
	}
	sort.Strings(loaded)
	rec := map[string]any{
		"abiVersions":    wasm.ABIVersions(),
		"maxMemoryBytes": h.cfg.Host.Wasm.MaxMemoryBytes,
		"maxExecutionMs": h.cfg.Host.Wasm.MaxExecution.Milliseconds(),
		"loadedPacks":    loaded,
		"engine":         "wazero",
	}
	if v := wazeroVersion(); v != "" {
		rec["engineVersion"] = v
	}
	b, err := json.Marshal(rec)
	if err != nil {
		panic(fmt.Sprintf("nodePackRuntimes record: %v", err))
	}
	h.reg.SetRootRecord(RecordNodePackRuntimes, registry.Family{
		Status: "stable", Since: "2.0", Witness: "claims-check",
		Facets: map[string]json.RawMessage{"wasm": b},
	})
}

// wazeroVersion is the version of the WebAssembly runtime the host was
// built with, "" when the build does not say.
func wazeroVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range info.Deps {
		if d.Path == "github.com/tetratelabs/wazero" {
			return strings.TrimPrefix(d.Version, "v")
		}
	}
	return ""
}
