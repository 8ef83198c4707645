package integration

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/registry"
)

// A required capability that crashes makes the host not ready while it
// restarts, and ready again once it is back: /readyz answers 503 and then
// 200 again. The backoff is held open by the test, so the not-ready window
// lasts as long as the test needs to look at it.
func TestReadyAgainOnceARequiredCapabilityRecovers(t *testing.T) {
	dir := t.TempDir()
	plugin := filepath.Join(dir, "testcap")
	copyExecutable(t, bin.testcap, plugin, 0o755)
	cfg := writeConfig(t, `
host { plugin_dir = "BIN" }
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "other" {
  plugin   = "`+plugin+`"
  families = ["test.other"]
  required = true
}
`)
	policy, entered, release := heldRestarts()
	h := startHostWith(t, cfg, host.Options{Restart: policy})
	if err := h.Ready(); err != nil {
		t.Fatalf("before the crash: Ready() = %v, want nil", err)
	}
	crashOther(t, h)

	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no restart backoff began within 30 s of the crash")
	}
	var nr *host.NotReadyError
	if err := h.Ready(); !errors.As(err, &nr) {
		t.Fatalf("while the required capability restarts: Ready() = %v, want a *NotReadyError", err)
	}
	if st, ok := nr.Capabilities["other"]; !ok || st != registry.StateRestarting || len(nr.Order) != 1 {
		t.Errorf("not ready for %v (%v), want only other, restarting", nr.Capabilities, nr.Order)
	}

	close(release)
	waitForState(t, h, "other", registry.StateReady, 1)
	if err := h.Ready(); err != nil {
		t.Errorf("once the required capability is back: Ready() = %v, want nil", err)
	}
}
