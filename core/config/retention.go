package config

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wophost/wophost/core/idempotency"
)

// Defaults of the retention block. A run record takes about 4 KiB on
// disk, so the default caps keep run records and idempotency records at
// a few hundred MiB each on a busy host.
const (
	DefaultRunRecordAge       = 7 * 24 * time.Hour
	DefaultMaxRunRecords      = 100000
	DefaultIdempotencyKeyAge  = 24 * time.Hour
	DefaultMaxIdempotencyKeys = 100000
	DefaultRetentionInterval  = 10 * time.Minute
)

// Bounds of the retention block's counts.
const (
	MaxRetainedRecords = 100000000
	// MinRetentionInterval keeps the pruner from spinning on directory
	// listings.
	MinRetentionInterval = time.Second
)

// Retention says how long the host keeps what it writes under state_dir,
// and how much of it: run records and the outcomes of idempotency keys.
// The host prunes at start and every Interval, oldest first.
type Retention struct {
	// RunRecords is the age after which a run record is deleted.
	RunRecords time.Duration
	// MaxRunRecords is the most run records kept; the oldest go first.
	MaxRunRecords int
	// IdempotencyKeys is how long a key's outcome is answered again; at
	// least 24 hours.
	IdempotencyKeys time.Duration
	// MaxIdempotencyKeys bounds the keys held at once: past it, a request
	// with a new key is refused (retryable) until old keys expire, as
	// keys younger than IdempotencyKeys are never dropped.
	MaxIdempotencyKeys int
	// Interval is the time between two prunings.
	Interval time.Duration

	DefRange hcl.Range
}

// DefaultRetention is the retention of a host block without a retention
// block.
func DefaultRetention() Retention {
	return Retention{
		RunRecords:         DefaultRunRecordAge,
		MaxRunRecords:      DefaultMaxRunRecords,
		IdempotencyKeys:    DefaultIdempotencyKeyAge,
		MaxIdempotencyKeys: DefaultMaxIdempotencyKeys,
		Interval:           DefaultRetentionInterval,
	}
}

type rawRetention struct {
	RunRecords         *hcl.Attribute `hcl:"run_records"`
	MaxRunRecords      *hcl.Attribute `hcl:"max_run_records"`
	IdempotencyKeys    *hcl.Attribute `hcl:"idempotency_keys"`
	MaxIdempotencyKeys *hcl.Attribute `hcl:"max_idempotency_keys"`
	Interval           *hcl.Attribute `hcl:"interval"`
	DefRange           hcl.Range      `hcl:",def_range"`
}

// retention validates the host block's retention block, if any.
func (d *decoder) retention(blocks []*rawRetention) Retention {
	r := DefaultRetention()
	if len(blocks) == 0 {
		return r
	}
	for _, dup := range blocks[1:] {
		d.errorf(dup.DefRange, "Duplicate retention block",
			"A retention block is declared at %s and again at %s; only one is allowed.",
			posString(blocks[0].DefRange), posString(dup.DefRange))
	}
	raw := blocks[0]
	r.DefRange = raw.DefRange
	if dur, ok := d.durationAttr(raw.RunRecords); ok {
		r.RunRecords = dur
	}
	if n, ok := d.intAttr(raw.MaxRunRecords, 1, MaxRetainedRecords); ok {
		r.MaxRunRecords = n
	}
	if dur, ok := d.durationAttr(raw.IdempotencyKeys); ok {
		if dur < idempotency.MinRetention {
			d.errorf(raw.IdempotencyKeys.Expr.Range(), "Invalid idempotency_keys",
				"idempotency_keys must be at least %s: a client may repeat a request for a day after it first sent it; got %s.",
				formatHours(idempotency.MinRetention), dur)
		} else {
			r.IdempotencyKeys = dur
		}
	}
	if n, ok := d.intAttr(raw.MaxIdempotencyKeys, 1, MaxRetainedRecords); ok {
		r.MaxIdempotencyKeys = n
	}
	if dur, ok := d.durationAttr(raw.Interval); ok {
		if dur < MinRetentionInterval {
			d.errorf(raw.Interval.Expr.Range(), "Invalid interval", "interval must be at least %s; got %s.", MinRetentionInterval, dur)
		} else {
			r.Interval = dur
		}
	}
	return r
}

// formatHours writes a whole number of hours the way an operator would
// type it ("24h"), not as time.Duration prints it ("24h0m0s").
func formatHours(d time.Duration) string {
	return fmt.Sprintf("%dh", int64(d/time.Hour))
}
