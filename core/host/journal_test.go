package host

import (
	"testing"

	"github.com/wophost/wophost/core/config"
)

// TestHoldsSecretWithoutHTTPBlock checks that a config with no http block
// (what `host run` and `host call` often read) has secrets to look for
// without one: the storage dsn is found, and nothing panics for want of
// API tokens.
func TestHoldsSecretWithoutHTTPBlock(t *testing.T) {
	const dsn = "postgres://wophost:s3cret-password@db.internal/wophost"
	h := &Host{cfg: &config.Config{Host: config.Host{Storage: config.Storage{DSN: dsn}}}}
	if !h.holdsSecret([]byte(`{"echo":"` + dsn + `"}`)) {
		t.Error("the storage dsn is not found in a result that holds it")
	}
	if h.holdsSecret([]byte(`{"echo":"nothing secret"}`)) {
		t.Error("a result with no secret is said to hold one")
	}
}

// TestHoldsSecretFindsAPITokens checks that the API's bearer tokens are
// secrets the invocation log keeps out.
func TestHoldsSecretFindsAPITokens(t *testing.T) {
	const token = "api-token-0123456789abcdef"
	h := &Host{cfg: &config.Config{Host: config.Host{HTTP: &config.HTTP{Tokens: []string{token}}}}}
	if !h.holdsSecret([]byte(`{"echo":"` + token + `"}`)) {
		t.Error("an API token is not found in a result that holds it")
	}
}
