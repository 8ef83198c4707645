package host

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
)

// The invocation log checks every outcome for the configured secrets;
// a host block without an http block (HTTP nil) has no tokens among them
// and must not fail on it.
func TestHoldsSecretWithoutHTTPBlock(t *testing.T) {
	for name, cfg := range map[string]config.Host{
		"no http block": {StateDir: t.TempDir(), Storage: config.Storage{DSN: "postgres://u:hunter22@db/x"}},
		"tokens":        {StateDir: t.TempDir(), HTTP: &config.HTTP{Tokens: []string{"token-abcdef"}}},
	} {
		t.Run(name, func(t *testing.T) {
			h := New(&config.Config{Host: cfg}, config.NewLoader(), hclog.NewNullLogger(), "test")
			if h.holdsSecret([]byte(`{"answer":"plain"}`)) {
				t.Errorf("a plain answer holds a secret")
			}
			secret := cfg.Storage.DSN
			if cfg.HTTP != nil {
				secret = cfg.HTTP.Tokens[0]
			}
			if !h.holdsSecret([]byte(`{"leak":"` + secret + `"}`)) {
				t.Errorf("an answer holding %q holds no secret", secret)
			}
		})
	}
}
