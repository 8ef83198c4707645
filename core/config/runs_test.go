package config

import (
	"strings"
	"testing"
)

func TestRunsBlock(t *testing.T) {
	cfg, _ := mustLoad(t, newFixture(t, `
host {
  runs {
    log_max_calls = 500
    log_max_bytes = 65536
  }
}
`))
	got := cfg.Host.Runs
	if got.LogMaxCalls != 500 || got.LogMaxBytes != 65536 {
		t.Fatalf("runs = %+v, want 500 calls, 65536 bytes", got)
	}
	if got.DefRange.Start.Line != 3 {
		t.Fatalf("runs DefRange = %v, want line 3", got.DefRange)
	}

	cfg, _ = mustLoad(t, newFixture(t, "host {\n  runs {\n    log_max_bytes = 4096\n  }\n}\n"))
	if r := cfg.Host.Runs; r.LogMaxBytes != MinRunLogMaxBytes || r.LogMaxCalls != DefaultRunLogMaxCalls {
		t.Fatalf("partial block: %+v", r)
	}
	cfg, _ = mustLoad(t, newFixture(t, "host {\n  runs {\n    log_max_calls = 1000000\n    log_max_bytes = 1073741824\n  }\n}\n"))
	if r := cfg.Host.Runs; r.LogMaxCalls != MaxRunLogMaxCalls || r.LogMaxBytes != MaxRunLogMaxBytes {
		t.Fatalf("upper bounds: %+v", r)
	}
	cfg, _ = mustLoad(t, newFixture(t, "host {}\n"))
	if r := cfg.Host.Runs; r.LogMaxCalls != 10000 || r.LogMaxBytes != 16<<20 {
		t.Fatalf("no block: %+v", r)
	}
}

func TestRunsBlockDiagnostics(t *testing.T) {
	block := func(body string) string { return "host {\n  runs {\n    " + body + "\n  }\n}\n" }
	for _, tc := range []struct {
		name, src, summary, detail string
		line, col                  int
	}{
		{"negative calls", block(`log_max_calls = -1`), "Invalid log_max_calls", "between 0 and 1000000; got -1", 3, 21},
		{"too many calls", block(`log_max_calls = 1000001`), "Invalid log_max_calls", "between 0 and 1000000", 3, 21},
		{"too few bytes", block(`log_max_bytes = 4095`), "Invalid log_max_bytes", "between 4096 and 1073741824; got 4095", 3, 21},
		{"too many bytes", block(`log_max_bytes = 1073741825`), "Invalid log_max_bytes", "between 4096 and 1073741824", 3, 21},
		{"fraction", block(`log_max_calls = 1.5`), "Unsuitable value type", "", 3, 21},
		{"wrong type", block(`log_max_bytes = "16MiB"`), "Unsuitable value type", "", 3, 21},
		{"unknown setting", block(`log_max_lines = 10`), "Unsupported argument", "", 3, 5},
		{"two blocks", "host {\n  runs {}\n  runs {}\n}\n", "Duplicate runs block", "again at", 3, 3},
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
}

// host.hcl.example documents the runs block with its defaults.
func TestExampleConfigRuns(t *testing.T) {
	cfg, diags := NewLoader().Load("../../host.hcl.example")
	if diags.HasErrors() {
		t.Fatalf("host.hcl.example: %s", FormatDiagnostics(diags))
	}
	got := cfg.Host.Runs
	if got.DefRange.Filename == "" {
		t.Fatal("host.hcl.example has no runs block")
	}
	got.DefRange = Runs{}.DefRange
	if got != DefaultRuns() {
		t.Fatalf("host.hcl.example's runs %+v differs from the defaults %+v", got, DefaultRuns())
	}
}
