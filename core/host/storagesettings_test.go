package host

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
)

// A reload restarts a plugin whose storage settings changed (its pool was
// opened with the old ones) and keeps one whose settings did not.
func TestFingerprintCoversStorage(t *testing.T) {
	cc := &config.Capability{Name: "Acme.Prompts", PluginPath: "/bin/wophost-prompts"}
	base := config.Storage{Backend: config.BackendPostgres, DSN: "postgres://a@db1/x", MaxConnections: 8, StatementTimeout: 5 * time.Second}
	stateDir := t.TempDir()
	fingerprint := func(s config.Storage) string {
		cfg := &config.Config{Host: config.Host{StateDir: stateDir, LogLevel: "info", Storage: s}}
		h := New(cfg, config.NewLoader(), hclog.NewNullLogger(), "test")
		defer h.Close()
		return h.fingerprint(cc, "id", []byte(`{}`))
	}
	want := fingerprint(base)
	if got := fingerprint(base); got != want {
		t.Fatalf("the same storage settings give two fingerprints: %s, %s", want, got)
	}
	for name, change := range map[string]func(*config.Storage){
		"dsn":               func(s *config.Storage) { s.DSN = "postgres://a@db2/x" },
		"backend":           func(s *config.Storage) { s.Backend, s.DSN = config.BackendEmbedded, "" },
		"max_connections":   func(s *config.Storage) { s.MaxConnections = 2 },
		"statement_timeout": func(s *config.Storage) { s.StatementTimeout = time.Second },
	} {
		s := base
		change(&s)
		if fingerprint(s) == want {
			t.Errorf("changing %s keeps the fingerprint: the plugin would keep its old pool", name)
		}
	}
}

func TestStorageFor(t *testing.T) {
	cfg := &config.Config{Host: config.Host{StateDir: t.TempDir(), LogLevel: "info", Storage: config.Storage{
		Backend: config.BackendPostgres, DSN: "postgres://a@db/x", MaxConnections: 3, StatementTimeout: 2 * time.Second,
	}}}
	h := New(cfg, config.NewLoader(), hclog.NewNullLogger(), "test")
	defer h.Close()
	s := h.storageFor(&config.Capability{Name: "Acme.Prompts"})
	if s.Backend != "postgres" || s.DSN != "postgres://a@db/x" || s.MaxConnections != 3 || s.StatementTimeout != 2*time.Second ||
		s.Schema != "wophost_acme_prompts" {
		t.Fatalf("storageFor = %#v (dsn %q)", s, s.DSN)
	}
}
