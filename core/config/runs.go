package config

import (
	"github.com/hashicorp/hcl/v2"
)

// Defaults and bounds of the runs block. Sizes are integers of bytes, as
// max_message_bytes is.
const (
	// DefaultRunLogMaxCalls is the most calls one run's invocation log
	// records.
	DefaultRunLogMaxCalls = 10000
	// MaxRunLogMaxCalls bounds log_max_calls.
	MaxRunLogMaxCalls = 1000000
	// DefaultRunLogMaxBytes is the most bytes one run's invocation log
	// holds (16 MiB).
	DefaultRunLogMaxBytes = 16 << 20
	// MinRunLogMaxBytes keeps room for at least a few calls in a log.
	MinRunLogMaxBytes = 4096
	// MaxRunLogMaxBytes bounds log_max_bytes (1 GiB), as a run record is
	// read back whole for a replay.
	MaxRunLogMaxBytes = 1 << 30
)

// Runs bounds what the host records of one node run beyond its input:
// the invocation log, the calls the run makes, kept in its run record for
// a replay. How long run records are kept is the retention block's.
type Runs struct {
	// LogMaxCalls is the most calls one run's log records; a log cut
	// short is marked as such. 0 keeps no log: the host then does no
	// per-call work for it, and a replay of such a run answers no call
	// with effects (replay_source_missing).
	LogMaxCalls int
	// LogMaxBytes is the most bytes one run's log holds.
	LogMaxBytes int

	DefRange hcl.Range
}

// DefaultRuns is the runs setting of a host block without a runs block.
func DefaultRuns() Runs {
	return Runs{LogMaxCalls: DefaultRunLogMaxCalls, LogMaxBytes: DefaultRunLogMaxBytes}
}

type rawRuns struct {
	LogMaxCalls *hcl.Attribute `hcl:"log_max_calls"`
	LogMaxBytes *hcl.Attribute `hcl:"log_max_bytes"`
	DefRange    hcl.Range      `hcl:",def_range"`
}

// runs validates the host block's runs block, if any.
func (d *decoder) runs(blocks []*rawRuns) Runs {
	r := DefaultRuns()
	if len(blocks) == 0 {
		return r
	}
	for _, dup := range blocks[1:] {
		d.errorf(dup.DefRange, "Duplicate runs block",
			"A runs block is declared at %s and again at %s; only one is allowed.",
			posString(blocks[0].DefRange), posString(dup.DefRange))
	}
	raw := blocks[0]
	r.DefRange = raw.DefRange
	if n, ok := d.intAttr(raw.LogMaxCalls, 0, MaxRunLogMaxCalls); ok {
		r.LogMaxCalls = n
	}
	if n, ok := d.intAttr(raw.LogMaxBytes, MinRunLogMaxBytes, MaxRunLogMaxBytes); ok {
		r.LogMaxBytes = n
	}
	return r
}
