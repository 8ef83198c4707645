package config

import (
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Defaults and bounds of the health block.
const (
	// DefaultHealthInterval is how often the host asks each plugin
	// process whether it is alive.
	DefaultHealthInterval = 10 * time.Second
	// DefaultHealthTimeout bounds one health check.
	DefaultHealthTimeout = 5 * time.Second
	// DefaultHealthFailures is how many checks in a row a process may
	// miss before the host takes it for hung.
	DefaultHealthFailures = 3
	// MaxHealthFailures bounds failures.
	MaxHealthFailures = 100
)

// Health is how the host finds a plugin process that stopped answering
// (stopped by a signal, deadlocked, swapped out): it asks each one the
// protocol's health check every Interval, each within Timeout, and after
// Failures misses in a row withdraws its families and restarts it by the
// restart policy, as if it had crashed.
type Health struct {
	Interval time.Duration
	Timeout  time.Duration
	Failures int

	DefRange hcl.Range
}

// DefaultHealth is the health setting of a host block without a health
// block.
func DefaultHealth() Health {
	return Health{Interval: DefaultHealthInterval, Timeout: DefaultHealthTimeout, Failures: DefaultHealthFailures}
}

type rawHealth struct {
	Interval *hcl.Attribute `hcl:"interval"`
	Timeout  *hcl.Attribute `hcl:"timeout"`
	Failures *hcl.Attribute `hcl:"failures"`
	DefRange hcl.Range      `hcl:",def_range"`
}

// health validates the host block's health block, if any.
func (d *decoder) health(blocks []*rawHealth) Health {
	h := DefaultHealth()
	if len(blocks) == 0 {
		return h
	}
	for _, dup := range blocks[1:] {
		d.errorf(dup.DefRange, "Duplicate health block",
			"A health block is declared at %s and again at %s; only one is allowed.",
			posString(blocks[0].DefRange), posString(dup.DefRange))
	}
	raw := blocks[0]
	h.DefRange = raw.DefRange
	if dur, ok := d.durationAttr(raw.Interval); ok {
		h.Interval = dur
	}
	if dur, ok := d.durationAttr(raw.Timeout); ok {
		h.Timeout = dur
	}
	if n, ok := d.intAttr(raw.Failures, 1, MaxHealthFailures); ok {
		h.Failures = n
	}
	if raw.Timeout != nil && raw.Interval != nil && h.Timeout > h.Interval {
		d.errorf(raw.Timeout.Expr.Range(), "Invalid health timeout",
			"timeout (%s) must not be longer than interval (%s): a check would still run when the next one is due.", h.Timeout, h.Interval)
	}
	return h
}
