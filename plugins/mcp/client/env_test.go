package client

import (
	"slices"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/hostwire"
)

// A stdio server sees the base set of the plugin's environment and its
// own configured variables, nothing else of the plugin's.
func TestServerEnv(t *testing.T) {
	t.Setenv("PATH", "/usr/bin:/bin")
	t.Setenv("TZ", "UTC")
	t.Setenv("WOPHOST_PLUGIN_COOKIE", "cookie-canary")
	t.Setenv("PLUGIN_CLIENT_CERT", "cert-canary")
	t.Setenv("PLUGIN_ONLY_SECRET", "secret-canary")
	env := serverEnv(map[string]string{"TOKEN": "for-the-server", "A": "1"})
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.Contains(kv, "canary") || !hostwire.IsBaseEnv(name) && name != "TOKEN" && name != "A" {
			t.Errorf("the server would see %q", kv)
		}
	}
	for _, want := range []string{"PATH=/usr/bin:/bin", "TZ=UTC", "TOKEN=for-the-server", "A=1"} {
		if !slices.Contains(env, want) {
			t.Errorf("environment %q lacks %q", env, want)
		}
	}
	if a, tok := slices.Index(env, "A=1"), slices.Index(env, "TOKEN=for-the-server"); a > tok {
		t.Errorf("configured variables out of order: %q", env)
	}
}
