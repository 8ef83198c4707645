package host

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wophost/wophost/core/registry"
)

// ErrClosing is Ready's answer once Close has begun.
var ErrClosing = errors.New("host is shutting down")

// NotReadyError lists the required capabilities that are not ready and
// the admitted packs that cannot run nodes now.
type NotReadyError struct {
	// Capabilities maps each capability block name to its current state.
	Capabilities map[string]registry.State
	// Order is the names in declaration order.
	Order []string
	// Packs maps each pack that is down to its state; PackOrder is their
	// names in declaration order.
	Packs     map[string]PackState
	PackOrder []string
}

func (e *NotReadyError) Error() string {
	var out []string
	if len(e.Order) > 0 {
		parts := make([]string, 0, len(e.Order))
		for _, n := range e.Order {
			parts = append(parts, fmt.Sprintf("%s (%s)", n, e.Capabilities[n]))
		}
		out = append(out, "required capabilities not ready: "+strings.Join(parts, ", "))
	}
	if len(e.PackOrder) > 0 {
		parts := make([]string, 0, len(e.PackOrder))
		for _, n := range e.PackOrder {
			parts = append(parts, fmt.Sprintf("%s (%s)", n, e.Packs[n]))
		}
		out = append(out, "packs not running: "+strings.Join(parts, ", "))
	}
	return strings.Join(out, "; ")
}

// Ready reports whether the host can serve what the operator asked for:
// nil when every capability block with required = true is ready, the
// state directory takes writes, every pack the host admitted can run
// nodes (none crashed, restarting or failed) and no pack was refused for
// require_sandbox; ErrClosing once Close has
// begun, a *StorageError while the state directory cannot take writes, a
// *NotReadyError otherwise.
func (h *Host) Ready() error {
	if h.isClosing() {
		return ErrClosing
	}
	if err := h.state.health.check(); err != nil {
		return err
	}
	states := map[string]registry.State{}
	for _, r := range h.reg.Records() {
		states[r.Name] = r.State
	}
	nr := &NotReadyError{Capabilities: map[string]registry.State{}, Packs: map[string]PackState{}}
	for _, c := range h.cfg.Capabilities {
		if c.Required && states[c.Name] != registry.StateReady {
			nr.Capabilities[c.Name] = states[c.Name]
			nr.Order = append(nr.Order, c.Name)
		}
	}
	for _, p := range h.Packs() {
		switch {
		case p.State == PackCrashed, p.State == PackRestarting, p.State == PackFailed,
			// require_sandbox asked for a sandbox this host cannot give:
			// the host is not what the operator asked for.
			p.State == PackRefused && p.Sandbox != nil && p.Sandbox.Required && len(p.Sandbox.NotEnforced) > 0:
			nr.Packs[p.Name] = p.State
			nr.PackOrder = append(nr.PackOrder, p.Name)
		}
	}
	if len(nr.Order) > 0 || len(nr.PackOrder) > 0 {
		return nr
	}
	return nil
}
