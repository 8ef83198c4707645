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

// log_max_calls = 0 keeps no log: a recorded run is not tracked at all,
// while a replay still is (it must answer from its source).
func TestNoInvocationLogWhenMaxCallsIsZero(t *testing.T) {
	for _, tc := range []struct {
		name    string
		calls   int
		opts    RunOptions
		tracked bool
	}{
		{"default log", config.DefaultRunLogMaxCalls, RunOptions{Record: true}, true},
		{"no log", 0, RunOptions{Record: true}, false},
		{"no log, a replay", 0, RunOptions{Record: true, Replay: &RunRecord{RunID: "run_1"}}, true},
		{"no record", config.DefaultRunLogMaxCalls, RunOptions{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Host{StateDir: t.TempDir(), Runs: config.Runs{LogMaxCalls: tc.calls, LogMaxBytes: config.DefaultRunLogMaxBytes}}
			h := New(&config.Config{Host: cfg}, config.NewLoader(), hclog.NewNullLogger(), "test")
			l, stop, err := h.trackCalls("run_2", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			if (l != nil) != tc.tracked {
				t.Errorf("tracked %v, want %v", l != nil, tc.tracked)
			}
		})
	}
}
