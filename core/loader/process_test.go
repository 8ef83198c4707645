package loader

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/sdk/tracing"
)

func writeFile(t *testing.T, dir, name string, content []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, content, mode); err != nil {
		t.Fatal(err)
	}
	// WriteFile's mode is filtered by the umask; set it exactly.
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPhaseError(t *testing.T) {
	cause := errors.New("handshake failed")
	err := &PhaseError{Phase: "started", Err: cause}
	if got := err.Error(); got != "started: handshake failed" {
		t.Errorf("Error() = %q", got)
	}
	if !errors.Is(err, cause) {
		t.Error("errors.Is does not reach the cause")
	}
}

// A child's environment is the base set of the host's, the protocol's
// variables, the operator's for this process and the tracing settings:
// nothing else of the host's environment.
func TestProcessEnv(t *testing.T) {
	t.Setenv("WOPHOST_API_TOKEN", "token-canary")
	t.Setenv("PROVIDER_KEY", "key-canary")
	t.Setenv("WOPHOST_OTLP_ENDPOINT", "inherited-canary:4317")
	t.Setenv("TZ", "UTC")
	env := processEnv("kv", Options{
		LogLevel: hclog.Debug, MaxMessageBytes: 1 << 20,
		Env:     map[string]string{"B_VAR": "2", "A_VAR": "1"},
		Tracing: &tracing.Settings{Endpoint: "collector:4317"},
	})
	for _, kv := range env {
		if strings.Contains(kv, "canary") {
			t.Errorf("the child would see %q", kv)
		}
	}
	for _, want := range []string{"TZ=UTC", "WOPHOST_PLUGIN_NAME=kv", "WOPHOST_LOG_LEVEL=debug", "A_VAR=1", "B_VAR=2", "WOPHOST_OTLP_ENDPOINT=collector:4317"} {
		if !slices.Contains(env, want) {
			t.Errorf("environment %q lacks %q", env, want)
		}
	}
	if a, b := slices.Index(env, "A_VAR=1"), slices.Index(env, "B_VAR=2"); a > b {
		t.Errorf("operator variables out of order: %q", env)
	}
}

// A process gets the GOMAXPROCS the host gives it, once, unless its block
// passes its own; with none to give, it gets none and Go's default.
func TestProcessEnvGoMaxProcs(t *testing.T) {
	count := func(env []string) (n int, last string) {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "GOMAXPROCS="); ok {
				n, last = n+1, v
			}
		}
		return n, last
	}
	t.Setenv("GOMAXPROCS", "7") // the host's own, which is not passed on
	for _, tt := range []struct {
		name      string
		opts      Options
		wantCount int
		want      string
	}{
		{"the host's choice", Options{GoMaxProcs: 1}, 1, "1"},
		{"the block's own wins", Options{GoMaxProcs: 1, Env: map[string]string{"GOMAXPROCS": "3"}}, 1, "3"},
		{"none to give", Options{}, 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, v := count(processEnv("kv", tt.opts))
			if n != tt.wantCount || v != tt.want {
				t.Errorf("GOMAXPROCS appears %d times, last %q; want %d, %q", n, v, tt.wantCount, tt.want)
			}
		})
	}
}
