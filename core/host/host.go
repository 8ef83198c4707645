// Package host assembles the core: it loads the capability plugins a
// config declares, keeps the registry of what is advertised, loads packs
// and runs their nodes, and serves host-service calls between them.
package host

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/wophost/wophost/core/agents"
	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/core/sandbox"
	"github.com/wophost/wophost/core/wasm"
	"github.com/wophost/wophost/internal/logdedup"
	"github.com/wophost/wophost/sdk/tracing"
	"github.com/wophost/wophost/sdk/wop"
)

// Name is the implementation name in the advertisement.
const Name = "wophost"

// Host is one running host. Start it once, then Close it.
type Host struct {
	cfg    *config.Config
	files  *config.Loader
	logger hclog.Logger
	opts   loader.Options
	// options are the settings that do not come from host.hcl; a reload
	// hands them to the next host.
	options Options

	reg    *registry.Registry
	router *dispatch.Router
	runs   *dispatch.Runs
	// tracer makes the host's spans; traces flushes them at Close.
	tracer trace.Tracer
	traces *tracing.Provider
	// prompts resolves and checks promptLibrary.get calls and records
	// what each run resolved (runrecord.go).
	prompts *dispatch.PromptPolicy
	// journal keeps each recorded run's invocation log and answers
	// replays from their source's (journal.go); secretValues, read once,
	// are what no log may hold.
	journal      *dispatch.Journal
	secretsOnce  sync.Once
	secretValues [][]byte
	// agents is the agent registry (agents.manifestRuntime, agents.go);
	// agentCheck runs the install checks of agent manifests.
	agents     *agents.Registry
	agentCheck *agents.Checker

	mu       sync.RWMutex
	caps     map[string]*capability
	packs    []*Pack
	byTypeID map[string]*Pack
	closing  bool
	// done is closed when Close begins, to cut restart backoffs short.
	done     chan struct{}
	watchers sync.WaitGroup

	// observer is told of every routed call (ObserveCalls); a reload
	// hands it to the next host.
	observer dispatch.Observer
	// prev is the host a reload replaces, set while this host starts: its
	// unchanged plugins are taken over rather than started (reload.go).
	// retired are the capabilities of prev the reload stopped to replace
	// them, started again there if the reload is refused.
	prev    *Host
	retired []*capability
	// state is the state directory's health, idempotency store and
	// retention (state.go).
	state *state
	// sandbox is what this kernel can enforce of a contained process;
	// onViolation is told of each run failed for a sandbox rule.
	sandbox     *sandbox.Support
	onViolation func(pack, code string)
	// wasm runs the WebAssembly packs, made with the first one
	// (wasmpacks.go).
	wasmOnce sync.Once
	wasm     *wasm.Engine
	wasmErr  error
}

// New returns a host for cfg. files is the loader that parsed cfg; it
// evaluates plugin config bodies and renders diagnostics.
func New(cfg *config.Config, files *config.Loader, logger hclog.Logger, version string) *Host {
	return NewWithOptions(cfg, files, logger, version, Options{})
}

// processGoMaxProcs is the GOMAXPROCS the host gives its plugin and
// pack processes: the host block's process_gomaxprocs when set, else half
// of cpus, at least 1. A call crosses the host, a pack and a plugin, each
// of them woken in turn; a Go runtime that may run on every CPU wakes
// further threads to look for work at each hand-off, and with several
// such processes on a few CPUs those threads take turns with the ones
// doing the work (BENCHMARKS.md, What was cut: "Plugin and pack processes
// at half the host's GOMAXPROCS").
func processGoMaxProcs(setting, cpus int) int {
	if setting > 0 {
		return setting
	}
	return max(1, cpus/2)
}

// NewWithOptions is New with the settings that do not come from host.hcl,
// such as the restart policy.
func NewWithOptions(cfg *config.Config, files *config.Loader, logger hclog.Logger, version string, options Options) *Host {
	level := hclog.LevelFromString(cfg.Host.LogLevel)
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	// During an outage (the database gone, a plugin failing every call)
	// the host and its plugins say the same warning once per request:
	// identical lines are written once, then once with their count.
	logger = logdedup.New(logger, logdedup.Window)
	reg := registry.New(registry.Implementation{Name: Name, Version: version})
	options = options.withDefaults()
	h := &Host{
		cfg:    cfg,
		files:  files,
		logger: logger,
		opts: loader.Options{
			Logger:               logger,
			LogLevel:             level,
			MaxMessageBytes:      cfg.Host.MaxMessageBytes,
			StartTimeout:         cfg.Host.StartTimeout,
			HostVersion:          version,
			DirectChannels:       cfg.Host.DirectChannels,
			DirectMaxUnreadBytes: cfg.Host.DirectMaxUnreadBytes,
			GoMaxProcs:           processGoMaxProcs(cfg.Host.ProcessGoMaxProcs, options.CPUs),
		},
		options:  options,
		reg:      reg,
		router:   dispatch.NewRouter(reg, cfg.Host.CallDepthLimit, cfg.Host.MaxMessageBytes),
		runs:     dispatch.NewRuns(),
		caps:     map[string]*capability{},
		byTypeID: map[string]*Pack{},
		done:     make(chan struct{}),
		sandbox:  sandbox.Probe(),
	}
	if rec := h.sandboxRecord(); rec != nil {
		reg.Provide(*rec)
	}
	h.traces = tracing.Noop()
	if t := cfg.Host.Tracing; t != nil {
		tp, err := tracing.NewProvider(context.Background(), t.Settings, t.ServiceName)
		if err != nil {
			logger.Warn("tracing is off: the exporter could not be set up", "error", err)
		} else {
			h.traces = tp
			h.opts.Tracing = &t.Settings
		}
	}
	h.tracer = h.traces.Tracer(tracerName)
	h.router.SetTracer(h.tracer)
	h.prompts = dispatch.NewPromptPolicy(h.promptLockMap)
	h.router.SetPolicy(wop.FamilyPromptLibrary, h.prompts)
	h.journal = dispatch.NewJournal(h.reg.IsPure, h.holdsSecret)
	h.router.SetJournal(h.journal)
	h.setUpAgents()
	h.state = newState(h)
	return h
}

// Registry returns the host's registry.
func (h *Host) Registry() *registry.Registry { return h.reg }

// Report is the outcome of Start. Config problems abort the start;
// capability and pack problems only withdraw what they concern.
type Report struct {
	Config       hcl.Diagnostics
	Capabilities hcl.Diagnostics
	Packs        hcl.Diagnostics
	// Waiting names each required capability that is waiting for what
	// its plugin needs (registry.StateWaiting). The host serves without
	// it and makes it ready once it can; whoever started the host decides
	// whether that is enough. They are not in All: the capability's own
	// diagnostic, in Capabilities, says why.
	Waiting hcl.Diagnostics
}

// All returns every diagnostic of the report.
func (r *Report) All() hcl.Diagnostics {
	out := append(hcl.Diagnostics{}, r.Config...)
	out = append(out, r.Capabilities...)
	return append(out, r.Packs...)
}

// Fatal reports whether the host cannot serve: a config error, or a
// required capability that is not ready.
func (r *Report) Fatal() bool { return r.Config.HasErrors() }

// Start loads every declared capability, then every pack. It returns once
// all have reached ready or failed.
func (h *Host) Start(ctx context.Context) *Report {
	rep := &Report{}
	h.state.start()
	h.logContainment()
	packs, launched := h.launchPacks(ctx)
	h.startCapabilities(ctx, rep)
	if rep.Fatal() {
		launched.Wait()
		for _, p := range packs {
			// A pack refused for its own files (pack.json, its binary) is
			// reported even so, for one run to name every problem; whether
			// its peers are advertised cannot be known without the plugins.
			if p.State == PackRefused {
				rep.Packs = append(rep.Packs, packRefused(p, fmt.Sprintf("Pack %q (%s): %s", p.Name, p.Path, p.Err)))
			}
			p.stopRuntime()
		}
		return rep
	}
	h.startPacks(ctx, rep, packs, launched)
	return rep
}

// Close stops every pack and plugin. No process the host started
// survives it.
func (h *Host) Close() {
	h.mu.Lock()
	if !h.closing {
		close(h.done)
	}
	h.closing = true
	caps := make([]*capability, 0, len(h.caps))
	for _, c := range h.caps {
		caps = append(caps, c)
	}
	packs := append([]*Pack(nil), h.packs...)
	h.mu.Unlock()

	var wg sync.WaitGroup
	for _, p := range packs {
		wg.Add(1)
		go func() { defer wg.Done(); stopPack(p) }()
	}
	for _, c := range caps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.stop()
			h.reg.Stop(c.cfg.Name)
			// Calls held for a successor that will not come now are refused.
			c.mu.Lock()
			gate := c.gate
			c.mu.Unlock()
			if gate != nil && gate.Closed() {
				gate.HandOver(nil)
			}
		}()
	}
	wg.Wait()
	h.watchers.Wait()
	h.closeWasm(context.Background())
	h.state.close()
	// After the processes: their spans reach the collector on their own.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.traces.Shutdown(ctx); err != nil {
		h.logger.Warn("could not flush traces", "error", err)
	}
}

// tracerName is the instrumentation scope of the host's spans.
const tracerName = "github.com/wophost/wophost/core/host"

// ObserveCalls reports every call the host routes to o. Call it before
// Start.
func (h *Host) ObserveCalls(o dispatch.Observer) {
	h.observer = o
	h.router.SetObserver(o)
}

func (h *Host) isClosing() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.closing
}

// ProcessIDs maps the name of each capability and pack whose process is
// running to that process's id, for measurements that read a process's
// resource use (the benchmarks' CPU time per call). Capability and pack
// names are disjoint config blocks; a name found in both would be a pack's.
func (h *Host) ProcessIDs() map[string]int {
	h.mu.RLock()
	caps := make(map[string]*capability, len(h.caps))
	for name, c := range h.caps {
		caps[name] = c
	}
	packs := append([]*Pack(nil), h.packs...)
	h.mu.RUnlock()
	out := make(map[string]int, len(caps)+len(packs))
	for name, c := range caps {
		if proc := c.current(); proc != nil && proc.PID() != 0 {
			out[name] = proc.PID()
		}
	}
	for _, p := range packs {
		p.live.Lock()
		if p.proc != nil && p.proc.PID() != 0 {
			out[p.Name] = p.proc.PID()
		}
		p.live.Unlock()
	}
	return out
}
