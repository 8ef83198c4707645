package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// secretPassword is the password written into every dsn of these tests;
// it must appear in no diagnostic and no rendering of one.
const secretPassword = "hunter2-s3cret"

func TestStorageBlock(t *testing.T) {
	cfg, _ := mustLoad(t, newFixture(t, `
host {
  storage {
    backend           = "postgres"
    dsn               = "postgres://app:`+secretPassword+`@db.internal:5432/wophost?sslmode=disable"
    max_connections   = 3
    statement_timeout = "250ms"
    claim_lease       = "1s"
  }
}
`))
	s := cfg.Host.Storage
	if s.Backend != BackendPostgres || s.DSN != "postgres://app:"+secretPassword+"@db.internal:5432/wophost?sslmode=disable" ||
		s.MaxConnections != 3 || s.StatementTimeout != 250*time.Millisecond || s.ClaimLease != time.Second {
		t.Fatalf("storage = %+v", s)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if text := fmt.Sprintf(verb, cfg.Host); strings.Contains(text, secretPassword) || !strings.Contains(text, Redacted) {
			t.Errorf("Sprintf(%q, host) = %s: want the dsn redacted", verb, text)
		}
	}

	cfg, _ = mustLoad(t, newFixture(t, "host {}\n"))
	if s := cfg.Host.Storage; s.Backend != BackendEmbedded || s.DSN != "" ||
		s.MaxConnections != DefaultStorageMaxConnections || s.StatementTimeout != DefaultStatementTimeout || s.ClaimLease != 30*time.Second {
		t.Fatalf("no block: %+v", s)
	}
	cfg, _ = mustLoad(t, newFixture(t, "host {\n  storage {\n    max_connections = 2\n  }\n}\n"))
	if s := cfg.Host.Storage; s.Backend != BackendEmbedded || s.MaxConnections != 2 || s.StatementTimeout != DefaultStatementTimeout {
		t.Fatalf("partial block: %+v", s)
	}
}

func TestStorageBlockDiagnostics(t *testing.T) {
	block := func(body string) string { return "host {\n  storage {\n    " + body + "\n  }\n}\n" }
	const goodDSN = `"postgres://app:` + secretPassword + `@db:5432/wophost"`
	for _, tc := range []struct {
		name, src, env, summary, detail string
		line, col                       int
	}{
		{"unknown backend", block(`backend = "mysql"`), "", "Invalid backend", "embedded, postgres", 3, 15},
		{"postgres without dsn", block(`backend = "postgres"`), "", "Missing dsn", "needs dsn", 2, 3},
		{"dsn for embedded", block(`dsn = ` + goodDSN), "", "Unexpected dsn", `backend = "postgres"`, 3, 11},
		{"dsn for explicit embedded", block("backend = \"embedded\"\n    dsn = " + goodDSN), "", "Unexpected dsn", "only used by", 4, 11},
		{"unparsable dsn", block("backend = \"postgres\"\n    dsn = \"postgres://app:" + secretPassword + "@db:notaport/wophost\""),
			"", "Invalid dsn", "not shown", 4, 11},
		{"unparsable dsn from env()", block("backend = \"postgres\"\n    dsn = env(\"WOPHOST_TEST_STORAGE_DSN\")"),
			"postgres://app:" + secretPassword + "@db:notaport/wophost", "Invalid dsn", "not shown", 4, 11},
		{"empty dsn", block("backend = \"postgres\"\n    dsn = \"\""), "", "Empty value", "dsn", 4, 11},
		{"dsn not a string", block("backend = \"postgres\"\n    dsn = [\"" + secretPassword + "\"]"), "", "Unsuitable value type", "dsn must be a string", 4, 11},
		{"no connections", block("dsn = " + goodDSN + "\n    backend = \"postgres\"\n    max_connections = 0"), "", "Invalid max_connections", "between 1 and", 5, 23},
		{"fractional connections", block("max_connections = 1.5"), "", "Unsuitable value type", "", 3, 23},
		{"zero timeout", block("dsn = " + goodDSN + "\n    backend = \"postgres\"\n    statement_timeout = \"0s\""), "", "Invalid duration", "greater than zero", 5, 25},
		{"bad timeout", block(`statement_timeout = "soon"`), "", "Invalid duration", "statement_timeout must be a duration", 3, 25},
		{"unknown setting", block(`schema = "x"`), "", "Unsupported argument", "", 3, 5},
		{"claim_lease below the bound", block("dsn = " + goodDSN + "\n    backend = \"postgres\"\n    claim_lease = \"999ms\""), "", "Invalid claim_lease", "between 1s and 1h0m0s", 5, 19},
		{"claim_lease above the bound", block("dsn = " + goodDSN + "\n    backend = \"postgres\"\n    claim_lease = \"1h0m1s\""), "", "Invalid claim_lease", "got 1h0m1s", 5, 19},
		{"claim_lease for embedded", block(`claim_lease = "30s"`), "", "Unexpected claim_lease", `backend = "postgres"`, 3, 19},
		{"two blocks", "host {\n  storage {}\n  storage {}\n}\n", "", "Duplicate storage block", "again at", 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("WOPHOST_TEST_STORAGE_DSN", tc.env)
			}
			f := newFixture(t, tc.src)
			l := NewLoader()
			_, diags := l.Load(f.path)
			d := findDiag(diags, tc.summary)
			if d == nil {
				t.Fatalf("no %q diagnostic in %v", tc.summary, summaries(diags))
			}
			if !strings.Contains(d.Detail, tc.detail) {
				t.Errorf("detail %q lacks %q", d.Detail, tc.detail)
			}
			if strings.Contains(tc.summary+d.Detail, "dsn") && !strings.Contains(d.Summary+d.Detail, "dsn") {
				t.Errorf("diagnostic %q does not name the dsn attribute", FormatDiagnostic(d))
			}
			assertPos(t, tc.summary, *d.Subject, f.path, tc.line, tc.col)

			var rendered strings.Builder
			if err := WriteDiagnostics(&rendered, l.Files(), diags); err != nil {
				t.Fatal(err)
			}
			for what, text := range map[string]string{"one-line form": FormatDiagnostics(diags), "rendering": rendered.String()} {
				if strings.Contains(text, secretPassword) {
					t.Errorf("the %s shows the dsn's password:\n%s", what, text)
				}
			}
		})
	}
}

// A snippet still shows where a secret comes from when env() names it,
// and the masked literal keeps the columns of what follows it.
func TestStorageSnippetMasksLiteralDSN(t *testing.T) {
	src := "host {\n  storage {\n    backend = \"postgres\"\n    dsn = \"postgres://app:" + secretPassword + "@db:notaport/x\"\n  }\n}\n"
	f := newFixture(t, src)
	l := NewLoader()
	_, diags := l.Load(f.path)
	var b strings.Builder
	if err := WriteDiagnostics(&b, l.Files(), diags); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `dsn = "***`) {
		t.Fatalf("the snippet does not show the masked dsn:\n%s", b.String())
	}

	t.Setenv("WOPHOST_TEST_STORAGE_DSN", "postgres://app:"+secretPassword+"@db:notaport/x")
	f = newFixture(t, "host {\n  storage {\n    backend = \"postgres\"\n    dsn = env(\"WOPHOST_TEST_STORAGE_DSN\")\n  }\n}\n")
	l = NewLoader()
	_, diags = l.Load(f.path)
	b.Reset()
	if err := WriteDiagnostics(&b, l.Files(), diags); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `env("WOPHOST_TEST_STORAGE_DSN")`) || strings.Contains(b.String(), secretPassword) {
		t.Fatalf("want the env() call and no password in:\n%s", b.String())
	}
}

func TestStorageSchema(t *testing.T) {
	for name, want := range map[string]string{
		"kv":                    "wophost_kv",
		"Acme.KV-store":         "wophost_acme_kv_store",
		"prompts_2":             "wophost_prompts_2",
		"ünïcode":               "wophost___n__code",
		strings.Repeat("a", 55): "wophost_" + strings.Repeat("a", 55),
	} {
		if got := StorageSchema(name); got != want {
			t.Errorf("StorageSchema(%q) = %q, want %q", name, got, want)
		}
	}
	long1, long2 := StorageSchema(strings.Repeat("a", 80)+"x"), StorageSchema(strings.Repeat("a", 80)+"y")
	if len(long1) != MaxSchemaBytes || len(long2) != MaxSchemaBytes || long1 == long2 {
		t.Errorf("long names: %q (%d), %q (%d): want two distinct %d-byte names", long1, len(long1), long2, len(long2), MaxSchemaBytes)
	}
}

func TestStorageSchemaCollision(t *testing.T) {
	src := `host {
  storage {
    backend = "postgres"
    dsn     = "postgres://db/x"
  }
}
capability "acme-kv" {
  plugin = "wophost-kv"
}
capability "acme_kv" {
  plugin = "wophost-kv"
}
`
	f := newFixture(t, src)
	_, diags := NewLoader().Load(f.path)
	d := findDiag(diags, "share a storage schema")
	if d == nil {
		t.Fatalf("no collision diagnostic in %v", summaries(diags))
	}
	assertPos(t, d.Summary, *d.Subject, f.path, 10, 1)

	// The embedded backend has no schemas to share.
	f = newFixture(t, strings.Replace(strings.Replace(src, `backend = "postgres"`, "", 1), `dsn     = "postgres://db/x"`, "", 1))
	_, diags = NewLoader().Load(f.path)
	if d := findDiag(diags, "share a storage schema"); d != nil {
		t.Fatalf("embedded backend: %s", FormatDiagnostic(d))
	}
}

// No capability's schema is the host's: not a block named after it, nor
// one named "host", "", or long enough to be cut.
func TestHostStorageSchemaIsNoCapabilitys(t *testing.T) {
	names := []string{"", "host", "wophost", HostStorageSchema, "_", "WOPHOST", strings.Repeat("h", 200), "wophost_"}
	for c := range 256 {
		names = append(names, string(rune(c)))
	}
	for _, name := range names {
		if got := StorageSchema(name); got == HostStorageSchema || !strings.HasPrefix(got, HostStorageSchema+"_") {
			t.Errorf("StorageSchema(%q) = %q: it must start with %q and so differ from the host's schema", name, got, HostStorageSchema+"_")
		}
	}
}
