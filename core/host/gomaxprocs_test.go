package host

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
)

func TestProcessGoMaxProcs(t *testing.T) {
	for _, tt := range []struct{ setting, cpus, want int }{
		{0, 1, 1},
		{0, 2, 1},
		{0, 3, 1},
		{0, 4, 2},
		{0, 64, 32},
		{1, 64, 1},
		{6, 2, 6},
	} {
		if got := processGoMaxProcs(tt.setting, tt.cpus); got != tt.want {
			t.Errorf("processGoMaxProcs(%d, %d) = %d, want %d", tt.setting, tt.cpus, got, tt.want)
		}
	}
}

// A reload restarts a plugin whose GOMAXPROCS changed, which its runtime
// read at start, whether through process_gomaxprocs or the CPUs the host
// started with, and keeps one whose GOMAXPROCS did not.
func TestFingerprintCoversGoMaxProcs(t *testing.T) {
	cc := &config.Capability{Name: "kv", PluginPath: "/bin/wophost-kv"}
	stateDir := t.TempDir()
	fingerprint := func(setting, cpus int) string {
		cfg := &config.Config{Host: config.Host{StateDir: stateDir, LogLevel: "info", ProcessGoMaxProcs: setting}}
		h := NewWithOptions(cfg, config.NewLoader(), hclog.NewNullLogger(), "test", Options{CPUs: cpus})
		defer h.Close()
		return h.fingerprint(cc, "id", []byte(`{}`))
	}
	base := fingerprint(0, 4)
	if got := fingerprint(2, 8); got != base {
		t.Errorf("the same GOMAXPROCS (2) gives two fingerprints")
	}
	if fingerprint(3, 4) == base {
		t.Errorf("process_gomaxprocs = 3 keeps the fingerprint of 2: the plugin would keep its old runtime")
	}
	if fingerprint(0, 2) == base {
		t.Errorf("a host of 2 CPUs keeps the fingerprint of one of 4")
	}
}
