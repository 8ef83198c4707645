package wire

import (
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestBaseEnv(t *testing.T) {
	in := []string{
		"PATH=/usr/bin:/bin", "HOME=/home/op", "WOPHOST_API_TOKEN=secret", "TMPDIR=/var/tmp",
		"AWS_SECRET_ACCESS_KEY=x", "LANG=C.UTF-8", "LC_ALL=C", "LC_TIME=en_GB.UTF-8", "LANGUAGE=en",
		"TZ=UTC", "PLUGIN_CLIENT_CERT=pem", "HTTPS_PROXY=http://proxy", "PATHX=no", "LCX=no", "malformed",
	}
	want := []string{"PATH=/usr/bin:/bin", "HOME=/home/op", "TMPDIR=/var/tmp", "LANG=C.UTF-8", "LC_ALL=C", "LC_TIME=en_GB.UTF-8", "LANGUAGE=en", "TZ=UTC"}
	if got := BaseEnv(in); !slices.Equal(got, want) {
		t.Errorf("BaseEnv = %q, want %q", got, want)
	}
}

func TestProcessEnvCarriesNothingElse(t *testing.T) {
	t.Setenv("WOPHOST_API_TOKEN", "token-canary")
	t.Setenv("SOME_SECRET", "secret-canary")
	t.Setenv("TZ", "Europe/Paris")
	env := ProcessEnv("kv", hclog.Info, 1<<20)
	for _, kv := range env {
		if strings.Contains(kv, "canary") {
			t.Errorf("ProcessEnv passes %q", kv)
		}
		name, _, _ := strings.Cut(kv, "=")
		if !IsBaseEnv(name) && name != EnvLogLevel && name != envMaxMessageBytes && name != EnvPluginName {
			t.Errorf("ProcessEnv passes %q, outside the base set and the protocol", kv)
		}
	}
	for _, want := range []string{"TZ=Europe/Paris", EnvPluginName + "=kv", EnvLogLevel + "=info", envMaxMessageBytes + "=1048576"} {
		if !slices.Contains(env, want) {
			t.Errorf("ProcessEnv lacks %q: %q", want, env)
		}
	}
}

func TestIsReservedEnv(t *testing.T) {
	for name, want := range map[string]bool{
		EnvLogLevel: true, EnvTLSFD: true, EnvSandbox: true, Handshake.MagicCookieKey: true, "WOPHOST_OTLP_HEADERS": true,
		"PLUGIN_CLIENT_CERT": true, "PLUGIN_MIN_PORT": true, "PATH": false, "OPENAI_API_KEY": false, "WOPHOSTX": false,
	} {
		if got := IsReservedEnv(name); got != want {
			t.Errorf("IsReservedEnv(%q) = %v, want %v", name, got, want)
		}
	}
}
