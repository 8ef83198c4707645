package config

import (
	"strings"
	"testing"
	"time"
)

func TestRetentionBlock(t *testing.T) {
	cfg, _ := mustLoad(t, newFixture(t, `
host {
  retention {
    run_records          = "72h"
    max_run_records      = 5000
    idempotency_keys     = "48h"
    max_idempotency_keys = 20000
    interval             = "1m"
  }
}
`))
	want := Retention{RunRecords: 72 * time.Hour, MaxRunRecords: 5000, IdempotencyKeys: 48 * time.Hour, MaxIdempotencyKeys: 20000, Interval: time.Minute}
	got := cfg.Host.Retention
	got.DefRange = want.DefRange
	if got != want {
		t.Fatalf("retention = %+v, want %+v", got, want)
	}

	cfg, _ = mustLoad(t, newFixture(t, "host {\n  retention {\n    max_run_records = 10\n  }\n}\n"))
	if r := cfg.Host.Retention; r.MaxRunRecords != 10 || r.RunRecords != DefaultRunRecordAge || r.IdempotencyKeys != DefaultIdempotencyKeyAge ||
		r.MaxIdempotencyKeys != DefaultMaxIdempotencyKeys || r.Interval != DefaultRetentionInterval {
		t.Fatalf("partial block: %+v", r)
	}
	cfg, _ = mustLoad(t, newFixture(t, "host {}\n"))
	if r := cfg.Host.Retention; r.RunRecords != DefaultRunRecordAge || r.MaxRunRecords != DefaultMaxRunRecords {
		t.Fatalf("no block: %+v", r)
	}
}

func TestRetentionBlockDiagnostics(t *testing.T) {
	block := func(body string) string { return "host {\n  retention {\n    " + body + "\n  }\n}\n" }
	for _, tc := range []struct {
		name, src, summary, detail string
		line, col                  int
	}{
		{"keys kept under a day", block(`idempotency_keys = "23h"`), "Invalid idempotency_keys", "at least 24h", 3, 24},
		{"keys kept minutes", block(`idempotency_keys = "90m"`), "Invalid idempotency_keys", "got 1h30m0s", 3, 24},
		{"bad duration", block(`run_records = "a week"`), "Invalid duration", "run_records must be a duration", 3, 19},
		{"zero age", block(`run_records = "0s"`), "Invalid duration", "greater than zero", 3, 19},
		{"no records kept", block(`max_run_records = 0`), "Invalid max_run_records", "between 1 and", 3, 23},
		{"negative keys", block(`max_idempotency_keys = -1`), "Invalid max_idempotency_keys", "between 1 and", 3, 28},
		{"interval too short", block(`interval = "10ms"`), "Invalid interval", "at least 1s", 3, 16},
		{"wrong type", block(`max_run_records = "many"`), "Unsuitable value type", "", 3, 23},
		{"unknown setting", block(`keep = "forever"`), "Unsupported argument", "", 3, 5},
		{"two blocks", "host {\n  retention {}\n  retention {}\n}\n", "Duplicate retention block", "again at", 3, 3},
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

// host.hcl.example documents every retention setting with its default.
func TestExampleConfigRetention(t *testing.T) {
	cfg, diags := NewLoader().Load("../../host.hcl.example")
	if diags.HasErrors() {
		t.Fatalf("host.hcl.example: %s", FormatDiagnostics(diags))
	}
	got := cfg.Host.Retention
	got.DefRange = Retention{}.DefRange
	if got != DefaultRetention() {
		t.Fatalf("host.hcl.example's retention %+v differs from the defaults %+v", got, DefaultRetention())
	}
	if cfg.Host.Retention.DefRange.Filename == "" {
		t.Fatal("host.hcl.example has no retention block")
	}
}
