package host

import (
	"context"
	"fmt"
	"time"
)

// healthTarget is one plugin or pack process checkHealth watches.
type healthTarget struct {
	// kind is "plugin" or "pack"; key and name the log field that names
	// the process ("capability" or "pack") and its value.
	kind, key, name string
	check           func(context.Context) error
	exited          <-chan struct{}
	// owned reports whether the process still serves: one stopped, or
	// handed to the next host (which checks it), is no longer checked.
	owned func() bool
	// kill ends the process at once, why being the reason its crash is
	// to be handled with.
	kill func(why error)
}

// checkHealth asks t's process the protocol's health check every interval
// of the health block, each within its timeout, until the process exits
// or the host closes. After failures misses in a row the process is taken
// for hung (stopped by a signal, deadlocked): it is killed at once, and
// its watcher handles the exit as a crash with the misses as the reason:
// withdrawn, then restarted by the restart policy.
func (h *Host) checkHealth(t healthTarget) {
	hc := h.cfg.Host.Health
	tick := time.NewTicker(hc.Interval)
	defer tick.Stop()
	missed := 0
	for {
		select {
		case <-tick.C:
		case <-t.exited:
			return
		case <-h.done:
			return
		}
		if !t.owned() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), hc.Timeout)
		err := t.check(ctx)
		cancel()
		if err == nil {
			missed = 0
			continue
		}
		missed++
		h.logger.Warn(t.kind+" missed a health check", t.key, t.name, "missed", missed, "failures", hc.Failures, "error", err)
		if missed < hc.Failures {
			continue
		}
		why := fmt.Errorf("%s stopped answering: %d health checks in a row failed (each within %s, every %s; health block), the last with %v; the host killed it", t.kind, missed, hc.Timeout, hc.Interval, err)
		h.logger.Error(t.kind+" is hung; killing it", t.key, t.name, "error", why)
		t.kill(why)
		return
	}
}
