package config

import (
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Defaults and bounds of the wasm block. The memory bounds are OpenWOP's
// for nodePackRuntimes.wasm.maxMemoryBytes; a wasm32 memory cannot pass
// 4 GiB, so a cap above that never binds.
const (
	// DefaultWasmMaxMemoryBytes is OpenWOP's default cap (128 MiB).
	DefaultWasmMaxMemoryBytes = 128 << 20
	// MinWasmMaxMemoryBytes is 1 MiB.
	MinWasmMaxMemoryBytes = 1 << 20
	// MaxWasmMaxMemoryBytes is 8 GiB.
	MaxWasmMaxMemoryBytes = 8 << 30
	// DefaultWasmMaxExecution is OpenWOP's default cap on one
	// invocation's execution (30 s).
	DefaultWasmMaxExecution = 30 * time.Second
	// MinWasmMaxExecution is the least cap a host may advertise (OpenWOP:
	// a wall-clock limit of at least 100 ms).
	MinWasmMaxExecution = 100 * time.Millisecond
	// MaxWasmMaxExecution bounds max_execution (24 h).
	MaxWasmMaxExecution = 24 * time.Hour
	// DefaultWasmWarmInstances is how many instances of each module the
	// host keeps ready ahead of runs.
	DefaultWasmWarmInstances = 1
	// MaxWasmWarmInstances bounds warm_instances.
	MaxWasmWarmInstances = 64
)

// Wasm is how the host runs a WebAssembly pack (runtime.language "wasm"):
// the caps each run's instance is held to and the instances kept ready.
// The host block's is every WebAssembly pack's default and what the host
// advertises; a pack block's wasm block replaces what it sets.
type Wasm struct {
	// MaxMemoryBytes caps the module's linear memory, whatever maximum
	// the module declares or leaves out.
	MaxMemoryBytes int64
	// MaxExecution caps the time one run spends in the module's own code;
	// time waiting for the host's answers to its imports does not count.
	MaxExecution time.Duration
	// WarmInstances is how many instances are instantiated ahead of runs;
	// each run still gets one no run used before.
	WarmInstances int

	DefRange hcl.Range
}

// DefaultWasm is the wasm block of a host block without one.
func DefaultWasm() Wasm {
	return Wasm{MaxMemoryBytes: DefaultWasmMaxMemoryBytes, MaxExecution: DefaultWasmMaxExecution, WarmInstances: DefaultWasmWarmInstances}
}

type rawWasm struct {
	MaxMemory     *hcl.Attribute `hcl:"max_memory"`
	MaxExecution  *hcl.Attribute `hcl:"max_execution"`
	WarmInstances *hcl.Attribute `hcl:"warm_instances"`
	DefRange      hcl.Range      `hcl:",def_range"`
}

// wasm validates a host or pack block's wasm blocks: each attribute set
// replaces base's value.
func (d *decoder) wasm(blocks []*rawWasm, base Wasm) Wasm {
	if len(blocks) == 0 {
		return base
	}
	for _, dup := range blocks[1:] {
		d.errorf(dup.DefRange, "Duplicate wasm block",
			"A wasm block is declared at %s and again at %s; only one is allowed.",
			posString(blocks[0].DefRange), posString(dup.DefRange))
	}
	raw := blocks[0]
	w := base
	w.DefRange = raw.DefRange
	if n, ok := d.memoryAttr(raw.MaxMemory, MinWasmMaxMemoryBytes, MaxWasmMaxMemoryBytes); ok {
		w.MaxMemoryBytes = n
	}
	if dur, ok := d.durationAttr(raw.MaxExecution); ok {
		if dur < MinWasmMaxExecution || dur > MaxWasmMaxExecution {
			d.errorf(raw.MaxExecution.Expr.Range(), "Invalid max_execution",
				"max_execution must be between %s and %s; got %s.", MinWasmMaxExecution, MaxWasmMaxExecution, dur)
		} else {
			w.MaxExecution = dur
		}
	}
	if n, ok := d.intAttr(raw.WarmInstances, 0, MaxWasmWarmInstances); ok {
		w.WarmInstances = n
	}
	return w
}
