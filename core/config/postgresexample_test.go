package config

import (
	"fmt"
	"testing"
)

// host.postgres.hcl.example decodes, takes its dsn from
// WOPHOST_DATABASE_URL, and runs the demo of host.hcl.example: the same
// capabilities and packs, on the postgres backend, in a state directory of
// its own.
func TestPostgresExampleConfig(t *testing.T) {
	const dsn = "postgres://demo@db.invalid:5432/wophost?sslmode=disable"
	t.Setenv("WOPHOST_DATABASE_URL", dsn)
	embedded, diags := NewLoader().Load("../../host.hcl.example")
	if diags.HasErrors() {
		t.Fatalf("host.hcl.example: %s", FormatDiagnostics(diags))
	}
	pg, diags := NewLoader().Load("../../host.postgres.hcl.example")
	if diags.HasErrors() || len(diags) > 0 {
		t.Fatalf("host.postgres.hcl.example: %s", FormatDiagnostics(diags))
	}
	if s := pg.Host.Storage; s.Backend != BackendPostgres || s.DSN != dsn {
		t.Errorf("storage: backend %q, dsn from the environment %v; want postgres and the environment's", s.Backend, s.DSN == dsn)
	}
	if embedded.Host.Storage.Backend != BackendEmbedded {
		t.Errorf("host.hcl.example's backend is %q; make run stays on %q", embedded.Host.Storage.Backend, BackendEmbedded)
	}
	if pg.Host.StateDir == embedded.Host.StateDir {
		t.Errorf("both examples keep their state in %s; the demos would mix", pg.Host.StateDir)
	}
	if got, want := deployment(pg), deployment(embedded); got != want {
		t.Errorf("host.postgres.hcl.example serves\n%s\nhost.hcl.example serves\n%s", got, want)
	}
}

// deployment lists what a config serves: each capability's name, plugin
// and families, each pack's name and directory.
func deployment(cfg *Config) string {
	var s string
	for _, c := range cfg.Capabilities {
		s += fmt.Sprintf("capability %s: %s %v\n", c.Name, c.PluginPath, c.Families)
	}
	for _, p := range cfg.Packs {
		s += fmt.Sprintf("pack %s: %s\n", p.Name, p.Path)
	}
	return s
}
