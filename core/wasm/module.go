package wasm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// LoadOptions are one pack's settings.
type LoadOptions struct {
	Limits
	// WarmInstances is how many instances are kept instantiated ahead of
	// runs (0 = none); the host chooses the default.
	WarmInstances int
	// Logger is the pack's logger: openwop_log lines and WASI
	// stdout/stderr go here.
	Logger hclog.Logger
}

// Module is one loaded pack: compiled once, instantiated per invocation.
type Module struct {
	engine   *Engine
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	config   wazero.ModuleConfig
	limits   Limits
	logger   hclog.Logger

	abiVersion    int
	packName      string
	nodeIDs       []string
	encoding      string
	usesExtension bool

	pool *pool
	// open counts the instances not yet closed, the warm ones included.
	open atomic.Int64
	// lastMemory is the linear memory size, in bytes, of the instance of
	// the last run ended.
	lastMemory atomic.Int64
	// memories are the linear memories of closed instances, for the next.
	memories memoryPool

	closeOnce sync.Once
	closeErr  error
}

// Load compiles wasm (the engine's cache makes a second Load of the same
// bytes cheap), checks its exports and imports, instantiates one instance
// to read openwop_abi_version, openwop_pack_name and the node ids, and
// closes it.
func (e *Engine) Load(ctx context.Context, wasm []byte, opts LoadOptions) (*Module, error) {
	limits, err := opts.Limits.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("wasm: load: %w", err)
	}
	if opts.WarmInstances < 0 {
		return nil, fmt.Errorf("wasm: load: WarmInstances %d is negative", opts.WarmInstances)
	}
	logger := opts.Logger
	if logger == nil {
		logger = e.logger
	}
	rtConfig := wazero.NewRuntimeConfig().
		WithCompilationCache(e.cache).
		WithCloseOnContextDone(true).
		WithCoreFeatures(api.CoreFeaturesV2).
		// The allocator of each instance (memoryCap) enforces the cap, so
		// that a refused grow is seen; the runtime allows all of wasm32.
		WithMemoryLimitPages(maxMemory32 / pageSize)
	rt := wazero.NewRuntimeWithConfig(ctx, rtConfig)
	m := &Module{engine: e, rt: rt, limits: limits, logger: logger}
	if err := m.load(ctx, wasm); err != nil {
		_ = rt.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := e.track(m); err != nil {
		_ = rt.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	m.pool = startPool(m, opts.WarmInstances)
	return m, nil
}

// load compiles and checks the module and reads what it declares.
func (m *Module) load(ctx context.Context, wasm []byte) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, m.rt); err != nil {
		return fmt.Errorf("wasm: load: WASI: %w", err)
	}
	cm, err := m.rt.CompileModule(ctx, wasm)
	if err != nil {
		return fmt.Errorf("wasm: load: compile: %w", err)
	}
	m.compiled = cm
	if err := checkExports(cm); err != nil {
		return err
	}
	if err := checkImports(cm, m.rt.Module(modWASI).ExportedFunctionDefinitions()); err != nil {
		return err
	}
	if mem := cm.ExportedMemories()[expMemory]; int64(mem.Min())*pageSize > m.limits.MaxMemoryBytes {
		return &MemoryError{MinBytes: int64(mem.Min()) * pageSize, LimitBytes: m.limits.MaxMemoryBytes}
	}
	for _, def := range cm.ImportedFunctions() {
		if mod, _, _ := def.Import(); mod == modWophost {
			m.usesExtension = true
		}
	}
	m.encoding = encodingOf(cm.ExportedFunctions()[expNodeInvoke].ResultTypes())
	if err := instantiateHostModules(ctx, m.rt, cm); err != nil {
		return err
	}
	// No arguments, environment or files; WASI's clocks stay wazero's fixed
	// fake ones, so that an instance reads nothing the host did not give.
	m.config = wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions("_initialize")
	return m.describe(ctx)
}

// describe reads the ABI version, the pack name and the node ids from one
// instance.
func (m *Module) describe(ctx context.Context) error {
	r, err := m.start(ctx, nil, nil)
	if err != nil {
		return fmt.Errorf("wasm: load: instantiate: %w", err)
	}
	defer r.end()
	if err := m.readDescription(r); err != nil {
		return fmt.Errorf("wasm: load: %w", err)
	}
	return nil
}

func (m *Module) readDescription(r *run) error {
	res, err := r.call(expABIVersion)
	if err != nil {
		return err
	}
	m.abiVersion = int(api.DecodeI32(res[0]))
	if !slices.Contains(ABIVersions(), m.abiVersion) {
		return &ABIError{Reported: m.abiVersion, Served: ABIVersions()}
	}
	if m.packName, err = r.readName(expPackName); err != nil {
		return err
	}
	res, err = r.call(expNodeCount)
	if err != nil {
		return err
	}
	count := api.DecodeI32(res[0])
	if count < 0 || count > MaxNodes {
		return fmt.Errorf("%s: the module answers %d nodes; want 0 .. %d", expNodeCount, count, MaxNodes)
	}
	seen := map[string]bool{}
	for i := range count {
		id, err := r.readName(expNodeIDAt, api.EncodeI32(i))
		if err != nil {
			return err
		}
		if seen[id] {
			return fmt.Errorf("%s(%d): the node id %q is listed twice", expNodeIDAt, i, id)
		}
		seen[id] = true
		m.nodeIDs = append(m.nodeIDs, id)
	}
	return r.memoryBreach()
}

// run is one use of one instance: at load, or one invocation.
type run struct {
	m      *Module
	ctx    context.Context // the caller's
	bctx   context.Context // the caller's, also ended by the execution cap
	st     *callState
	budget *budget
	inst   *instance
}

// start begins a run on inst, or on a new instance when inst is nil; the
// execution budget runs from here.
func (m *Module) start(ctx context.Context, imports Imports, inst *instance) (*run, error) {
	bctx, b := startBudget(ctx, m.limits.MaxExecution)
	r := &run{m: m, ctx: ctx, bctx: bctx, budget: b, inst: inst,
		st: &callState{imports: imports, budget: b, logger: m.logger}}
	if r.inst == nil {
		inst, err := m.instantiate(withState(bctx, r.st))
		r.inst = inst
		if err != nil {
			err = r.failure(err)
			r.end()
			return nil, err
		}
	}
	return r, nil
}

// end stops the budget, notes the instance's memory size and closes the
// instance.
func (r *run) end() {
	r.budget.stop()
	if r.inst.mod != nil {
		r.m.lastMemory.Store(int64(r.inst.mod.Memory().Size()))
	}
	r.inst.close(r.ctx)
}

// call calls one export of the instance.
func (r *run) call(name string, args ...uint64) ([]uint64, error) {
	fn := r.st.export(r.inst.mod, name)
	res, err := fn.Call(withState(r.bctx, r.st), args...)
	if err != nil {
		return nil, r.failure(err)
	}
	return res, nil
}

// readName calls an export answering a UTF-8 name pair.
func (r *run) readName(export string, args ...uint64) (string, error) {
	what := export
	if len(args) > 0 {
		what = fmt.Sprintf("%s(%d)", export, api.DecodeI32(args[0]))
	}
	res, err := r.call(export, args...)
	if err != nil {
		return "", err
	}
	b, err := r.readResult(what, res, MaxNameBytes)
	if err != nil {
		return "", err
	}
	if len(b) == 0 || !utf8.Valid(b) {
		return "", fmt.Errorf("%s: answers %q; want a non-empty UTF-8 name", what, b)
	}
	return string(b), nil
}

// readResult copies a (ptr, len) result out of the instance's memory, then
// hands it back with openwop_free.
func (r *run) readResult(what string, res []uint64, limit int) ([]byte, error) {
	ptr, n := splitPair(res)
	mem := r.inst.mod.Memory()
	if int64(n) > int64(limit) {
		return nil, &EnvelopeError{Problem: fmt.Sprintf("%s: %d bytes, above the bound of %d", what, n, limit)}
	}
	view, ok := mem.Read(ptr, n)
	if !ok {
		return nil, &EnvelopeError{Problem: fmt.Sprintf("%s: (ptr %d, len %d) runs past the end of memory (%d bytes)",
			what, ptr, n, mem.Size())}
	}
	b := append([]byte(nil), view...)
	if _, err := r.call(expFree, api.EncodeU32(ptr), api.EncodeU32(n)); err != nil {
		return nil, err
	}
	return b, nil
}

// memoryBreach reports a grow the memory cap refused during the run, even
// one the module survived.
func (r *run) memoryBreach() error {
	if size, refused := r.inst.memory.refusal(); refused {
		return &CapBreach{Kind: BreachMemory, Limit: r.m.limits.MaxMemoryBytes, Observed: int64(size)}
	}
	return nil
}

// failure turns the error of a call into what the caller is told: an
// import's error as it was, then a refused memory grow, then the execution
// cap, then the caller's context, else a trap.
func (r *run) failure(err error) error {
	if r.st.abort != nil {
		return r.st.abort
	}
	if breach := r.memoryBreach(); breach != nil {
		return breach
	}
	if spent, used := r.budget.stop(); spent {
		return &CapBreach{Kind: BreachExecutionTime, Limit: r.m.limits.MaxExecution.Milliseconds(), Observed: used.Milliseconds()}
	}
	if r.ctx.Err() != nil {
		return fmt.Errorf("wasm: stopped by the caller: %w", r.ctx.Err())
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return &Trap{Message: fmt.Sprintf("the module exited with code %d", exit.ExitCode())}
	}
	return &Trap{Message: trapMessage(err)}
}

// instance is one instantiation of the module, used for one invocation.
type instance struct {
	mod    api.Module
	open   *atomic.Int64 // the module's count of open instances
	memory *memoryCap
	rand   *seededRand
	stdout *lineLogger
	stderr *lineLogger
}

// instantiate makes an instance and runs its _initialize, if any; ctx
// carries the call state its host functions see.
func (m *Module) instantiate(ctx context.Context) (*instance, error) {
	inst := &instance{
		memory: &memoryCap{limit: uint64(m.limits.MaxMemoryBytes), memories: &m.memories},
		rand:   newSeededRand(),
		stdout: newLineLogger(m.logger, hclog.Info, "stdout"),
		stderr: newLineLogger(m.logger, hclog.Warn, "stderr"),
	}
	cfg := m.config.WithRandSource(inst.rand).WithStdout(inst.stdout).WithStderr(inst.stderr)
	mod, err := m.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, inst.memory), m.compiled, cfg)
	if err != nil {
		// Its memory may still have recorded a refusal.
		return inst, err
	}
	inst.mod = mod
	inst.open = &m.open
	m.open.Add(1)
	return inst, nil
}

// close ends the instance: nothing of it survives its invocation.
func (inst *instance) close(ctx context.Context) {
	inst.stdout.flush()
	inst.stderr.flush()
	if inst.mod != nil {
		_ = inst.mod.Close(context.WithoutCancel(ctx))
		inst.open.Add(-1)
	}
}

// PackName is the name openwop_pack_name answered.
func (m *Module) PackName() string { return m.packName }

// ABIVersion is the version openwop_abi_version answered.
func (m *Module) ABIVersion() int { return m.abiVersion }

// NodeIDs are the node ids in openwop_node_id_at order.
func (m *Module) NodeIDs() []string { return slices.Clone(m.nodeIDs) }

// Encoding is the pair form of openwop_node_invoke: EncodingMultiValue or
// EncodingPackedI64.
func (m *Module) Encoding() string { return m.encoding }

// UsesExtension reports whether the module imports anything from
// "wophost".
func (m *Module) UsesExtension() bool { return m.usesExtension }

// LastInstanceMemoryBytes is the size of the linear memory, in bytes, that
// the instance of the last run to end (Load's, or an invocation's) held at
// its end, its grows included; what one instance of the pack costs the
// host beyond the compiled code.
func (m *Module) LastInstanceMemoryBytes() int64 { return m.lastMemory.Load() }

// WarmReady is how many instances the warm pool holds ready now, from 0
// to LoadOptions.WarmInstances.
func (m *Module) WarmReady() int { return len(m.pool.ready) }

// Limits are the pack's caps, defaults applied.
func (m *Module) Limits() Limits { return m.limits }

// Close closes the warm instances and the compiled module.
func (m *Module) Close(ctx context.Context) error {
	m.closeOnce.Do(func() {
		m.pool.close(ctx)
		m.engine.untrack(m)
		if err := m.rt.Close(ctx); err != nil {
			m.closeErr = fmt.Errorf("wasm: close %s: %w", m.packName, err)
		}
	})
	return m.closeErr
}
