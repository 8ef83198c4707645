package host

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wophost/wophost/core/registry"
)

// ErrClosing is Ready's answer once Close has begun.
var ErrClosing = errors.New("host is shutting down")

// NotReadyError lists the required capabilities that are not ready.
type NotReadyError struct {
	// Capabilities maps each capability block name to its current state.
	Capabilities map[string]registry.State
	// Order is the names in declaration order.
	Order []string
}

func (e *NotReadyError) Error() string {
	parts := make([]string, 0, len(e.Order))
	for _, n := range e.Order {
		parts = append(parts, fmt.Sprintf("%s (%s)", n, e.Capabilities[n]))
	}
	return "required capabilities not ready: " + strings.Join(parts, ", ")
}

// Ready reports whether the host can serve what the operator marked
// required: nil when every capability block with required = true is
// ready and the state directory takes writes, ErrClosing once Close has
// begun, a *StorageError while the state directory cannot take writes,
// a *NotReadyError otherwise.
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
	nr := &NotReadyError{Capabilities: map[string]registry.State{}}
	for _, c := range h.cfg.Capabilities {
		if c.Required && states[c.Name] != registry.StateReady {
			nr.Capabilities[c.Name] = states[c.Name]
			nr.Order = append(nr.Order, c.Name)
		}
	}
	if len(nr.Order) > 0 {
		return nr
	}
	return nil
}
