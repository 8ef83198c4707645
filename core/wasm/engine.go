// Package wasm runs WebAssembly node packs in process, on wazero, through
// the OpenWOP WASM ABI v1 and wophost's "wophost" import extension.
//
// A Module is one compiled pack. Every invocation runs on an instance of its
// own, closed when the invocation ends, under the pack's memory and
// execution caps. Everything an instance sees (the request, the answers of
// its imports, its WASI random stream seeded per invocation, WASI's fixed
// clocks) is given by the host, so that a replay of a run sees the same.
package wasm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
)

// Default caps of a pack.
const (
	DefaultMaxMemoryBytes = 128 << 20
	DefaultMaxExecution   = 30 * time.Second
)

// Bounds on what a module hands the host.
const (
	// MaxResponseBytes bounds a response envelope and every JSON value or
	// payload the module passes to an import.
	MaxResponseBytes = 16 << 20
	// MaxNameBytes bounds the pack name, a node id, a channel name, a
	// variable key, a family and a method name.
	MaxNameBytes = 4 << 10
	// MaxLogBytes bounds one openwop_log message.
	MaxLogBytes = 64 << 10
	// MaxRandomBytes bounds one openwop_random request.
	MaxRandomBytes = 1 << 20
	// MaxNodes bounds openwop_node_count().
	MaxNodes = 4096
)

// pageSize is the size of a wasm32 memory page.
const pageSize = 64 << 10

// ABIVersions lists the ABI versions this runtime serves.
func ABIVersions() []int { return []int{1} }

// Limits are one pack's caps.
type Limits struct {
	// MaxMemoryBytes caps the module's linear memory; 0 means
	// DefaultMaxMemoryBytes.
	MaxMemoryBytes int64
	// MaxExecution caps the module's own execution per invocation, time
	// spent inside host imports excluded; 0 means DefaultMaxExecution.
	MaxExecution time.Duration
}

// withDefaults fills the zero caps and refuses negative ones.
func (l Limits) withDefaults() (Limits, error) {
	if l.MaxMemoryBytes < 0 {
		return l, fmt.Errorf("limits: MaxMemoryBytes %d is negative", l.MaxMemoryBytes)
	}
	if l.MaxExecution < 0 {
		return l, fmt.Errorf("limits: MaxExecution %s is negative", l.MaxExecution)
	}
	if l.MaxMemoryBytes == 0 {
		l.MaxMemoryBytes = DefaultMaxMemoryBytes
	}
	if l.MaxMemoryBytes > maxMemory32 {
		return l, fmt.Errorf("limits: MaxMemoryBytes %d is above wasm32's 4 GiB", l.MaxMemoryBytes)
	}
	if l.MaxExecution == 0 {
		l.MaxExecution = DefaultMaxExecution
	}
	return l, nil
}

// maxMemory32 is the largest linear memory of wasm32: 65536 pages.
const maxMemory32 = 65536 * pageSize

// Engine compiles and runs wasm packs. One per host. Safe for concurrent use.
type Engine struct {
	cache  wazero.CompilationCache
	logger hclog.Logger

	mu      sync.Mutex
	closed  bool
	modules map[*Module]struct{}
}

// NewEngine returns an engine whose compiled code is cached in cacheDir
// (created 0700 if missing) so that a restart skips compilation; cacheDir ""
// keeps the cache in memory only.
func NewEngine(cacheDir string, logger hclog.Logger) (*Engine, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	var cache wazero.CompilationCache
	if cacheDir == "" {
		cache = wazero.NewCompilationCache()
	} else {
		if err := os.MkdirAll(cacheDir, 0o700); err != nil {
			return nil, fmt.Errorf("wasm: compilation cache directory: %w", err)
		}
		c, err := wazero.NewCompilationCacheWithDir(cacheDir)
		if err != nil {
			return nil, fmt.Errorf("wasm: compilation cache in %s: %w", cacheDir, err)
		}
		cache = c
	}
	return &Engine{cache: cache, logger: logger, modules: map[*Module]struct{}{}}, nil
}

// Close closes every module still loaded, then the compilation cache.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	mods := make([]*Module, 0, len(e.modules))
	for m := range e.modules {
		mods = append(mods, m)
	}
	e.mu.Unlock()
	var errs []error
	for _, m := range mods {
		errs = append(errs, m.Close(ctx))
	}
	errs = append(errs, e.cache.Close(ctx))
	return errors.Join(errs...)
}

// track registers a loaded module so that Close reaches it.
func (e *Engine) track(m *Module) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("wasm: the engine is closed")
	}
	e.modules[m] = struct{}{}
	return nil
}

func (e *Engine) untrack(m *Module) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.modules, m)
}
