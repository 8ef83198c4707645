package config

import (
	"strings"
	"testing"
	"time"
)

func TestHealthBlock(t *testing.T) {
	cfg, _ := mustLoad(t, newFixture(t, `
host {
  health {
    interval = "2s"
    timeout  = "500ms"
    failures = 2
  }
}
`))
	got := cfg.Host.Health
	if got.Interval != 2*time.Second || got.Timeout != 500*time.Millisecond || got.Failures != 2 {
		t.Fatalf("health = %+v, want 2s, 500ms, 2", got)
	}
	if got.DefRange.Start.Line != 3 {
		t.Fatalf("health DefRange = %v, want line 3", got.DefRange)
	}
	cfg, _ = mustLoad(t, newFixture(t, "host {}\n"))
	if h := cfg.Host.Health; h.Interval != 10*time.Second || h.Timeout != 5*time.Second || h.Failures != 3 {
		t.Fatalf("no block: %+v", h)
	}
	cfg, _ = mustLoad(t, newFixture(t, "host {\n  health {\n    failures = 100\n  }\n}\n"))
	if h := cfg.Host.Health; h.Failures != MaxHealthFailures || h.Interval != DefaultHealthInterval {
		t.Fatalf("partial block at the bound: %+v", h)
	}
}

func TestHealthBlockDiagnostics(t *testing.T) {
	block := func(body string) string { return "host {\n  health {\n    " + body + "\n  }\n}\n" }
	for _, tc := range []struct {
		name, src, summary, detail string
		line, col                  int
	}{
		{"no failures", block(`failures = 0`), "Invalid failures", "between 1 and 100; got 0", 3, 16},
		{"too many failures", block(`failures = 101`), "Invalid failures", "between 1 and 100; got 101", 3, 16},
		{"zero interval", block(`interval = "0s"`), "Invalid duration", "interval must be greater than zero", 3, 16},
		{"not a duration", block(`timeout = "5"`), "Invalid duration", "timeout must be a duration", 3, 15},
		{"timeout over interval", block("interval = \"1s\"\n    timeout  = \"1001ms\""), "Invalid health timeout", "must not be longer than interval", 4, 16},
		{"unknown setting", block(`retries = 3`), "Unsupported argument", "", 3, 5},
		{"two blocks", "host {\n  health {}\n  health {}\n}\n", "Duplicate health block", "again at", 3, 3},
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
