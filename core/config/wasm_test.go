package config

import (
	"strings"
	"testing"
	"time"
)

// A pack takes the host block's wasm caps and replaces those its own
// block sets; without any block it has OpenWOP's defaults.
func TestWasmPackInheritsFromHost(t *testing.T) {
	cfg, _ := mustLoad(t, newFixture(t, `
host {
  wasm {
    max_memory     = "64MiB"
    warm_instances = 3
  }
}

pack "inherits" {
  path = "./packs/demo"
}

pack "own" {
  path = "./packs/demo"
  wasm {
    max_memory    = 2097152
    max_execution = "1500ms"
  }
}
`))
	if got, want := cfg.Host.Wasm, (Wasm{MaxMemoryBytes: 64 << 20, MaxExecution: 30 * time.Second, WarmInstances: 3}); got.MaxMemoryBytes != want.MaxMemoryBytes || got.MaxExecution != want.MaxExecution || got.WarmInstances != want.WarmInstances {
		t.Errorf("host wasm = %+v, want %+v", got, want)
	}
	if got := cfg.Packs[0].Wasm; got.MaxMemoryBytes != 64<<20 || got.MaxExecution != 30*time.Second || got.WarmInstances != 3 {
		t.Errorf("inheriting pack's wasm = %+v", got)
	}
	if got := cfg.Packs[1].Wasm; got.MaxMemoryBytes != 2<<20 || got.MaxExecution != 1500*time.Millisecond || got.WarmInstances != 3 {
		t.Errorf("own pack's wasm = %+v", got)
	}
	cfg, _ = mustLoad(t, newFixture(t, "pack \"p\" {\n  path = \"./packs/demo\"\n}\n"))
	if got := cfg.Packs[0].Wasm; got.MaxMemoryBytes != DefaultWasmMaxMemoryBytes || got.MaxExecution != DefaultWasmMaxExecution || got.WarmInstances != DefaultWasmWarmInstances {
		t.Errorf("default wasm = %+v", got)
	}
}

// Each bound refuses the value one past it, at the attribute, and keeps
// the one on it.
func TestWasmDiagnostics(t *testing.T) {
	block := func(body string) string { return "host {\n  wasm {\n    " + body + "\n  }\n}\n" }
	for _, tc := range []struct {
		name, src, summary, detail string
		line, col                  int
	}{
		{"memory a byte below 1MiB", block(`max_memory = 1048575`), "Invalid max_memory", "between 1MiB (1048576 bytes) and 8GiB (8589934592 bytes); got 1048575", 3, 18},
		{"memory a KiB above 8GiB", block(`max_memory = "8388609KiB"`), "Invalid max_memory", `got "8388609KiB" (8589935616 bytes)`, 3, 18},
		{"memory in decimal units", block(`max_memory = "128MB"`), "Invalid max_memory", `max_memory must be a whole number of bytes`, 3, 18},
		{"execution below 100ms", block(`max_execution = "99ms"`), "Invalid max_execution", "between 100ms and 24h0m0s; got 99ms", 3, 21},
		{"execution above 24h", block(`max_execution = "24h0m1s"`), "Invalid max_execution", "got 24h0m1s", 3, 21},
		{"execution not a duration", block(`max_execution = "fast"`), "Invalid duration", "max_execution must be a duration", 3, 21},
		{"negative warm instances", block(`warm_instances = -1`), "Invalid warm_instances", "between 0 and 64; got -1", 3, 22},
		{"too many warm instances", block(`warm_instances = 65`), "Invalid warm_instances", "got 65", 3, 22},
		{"unknown setting", block(`fuel = 1000`), "Unsupported argument", "", 3, 5},
		{"two blocks", "host {\n  wasm {}\n  wasm {}\n}\n", "Duplicate wasm block", "again at", 3, 3},
		{"in a pack", "pack \"p\" {\n  path = \"./packs/demo\"\n  wasm { max_memory = \"512KiB\" }\n}\n", "Invalid max_memory", `got "512KiB" (524288 bytes)`, 3, 23},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.src)
			_, diags := NewLoader().Load(f.path)
			d := findDiag(diags, tc.summary)
			if d == nil {
				t.Fatalf("no %q diagnostic in %v", tc.summary, summaries(diags))
			}
			if !strings.Contains(d.Detail, tc.detail) {
				t.Errorf("detail %q lacks %q", d.Detail, tc.detail)
			}
			assertPos(t, tc.summary, *d.Subject, f.path, tc.line, tc.col)
		})
	}
	for _, ok := range []string{`max_memory = 1048576`, `max_memory = "8GiB"`, `max_execution = "100ms"`, `max_execution = "24h"`, `warm_instances = 0`, `warm_instances = 64`} {
		if _, diags := NewLoader().Load(newFixture(t, block(ok)).path); diags.HasErrors() {
			t.Errorf("%s refused: %v", ok, diags)
		}
	}
}
