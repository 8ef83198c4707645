// Package figures turns the host's own Prometheus metrics into the live
// figures of the operator console: calls per second and latency per
// family and per capability, node runs, restarts and refusals over a
// sliding window, and the inline SVG charts that draw them.
//
// A Sampler gathers the metrics at a fixed pace and keeps, per sample, the
// cumulative values of the series it needs; Figures computes rates and
// latency quantiles from the differences between consecutive samples.
package figures

import "time"

// Other is the label under which the sampler folds the families,
// capabilities, codes, plugins and packs beyond Options.MaxSeries of a
// kind. The parentheses keep it apart from any real family, method, code
// or name.
const Other = "(other)"

// Point is one figure over one sample interval. Points of a series whose
// intervals touch (one's End is the next one's Start) are drawn joined;
// a missing interval, such as one with no call to time, breaks the line.
type Point struct {
	// Start and End bound the interval.
	Start, End time.Time
	// Value is the figure: a rate per second, a latency in seconds or a
	// count, as the field holding the point says.
	Value float64
}

// Series is the traffic of one family, one capability (family.method) or,
// for Figures.Runs, all node executions, over the window.
type Series struct {
	// Name is the family, the capability as family.method, Other for
	// those folded together, or empty for Figures.Runs.
	Name string
	// Calls is the number of calls (of runs, for Figures.Runs) that ended
	// in the window, whatever their code.
	Calls uint64
	// PerSecond is Calls over the window's span.
	PerSecond float64
	// Timed is the number of those calls the latency histogram saw; P50
	// and P99 are zero when it is zero.
	Timed uint64
	// P50 and P99 are the window's latency quantiles, in seconds,
	// estimated from the histogram's buckets.
	P50, P99 float64
	// Rate holds calls per second, one point per sample interval since
	// the label was kept: from the first in which it moved while a place
	// was free.
	Rate []Point
	// P50s and P99s hold the latency quantiles, in seconds, of the
	// intervals in which calls were timed; an interval without any has no
	// point rather than a zero.
	P50s, P99s []Point
}

// Restart is the restarts of one plugin or pack over the window.
type Restart struct {
	// Name is the plugin's capability or the pack's name, or Other.
	Name string
	// Kind is "plugin" or "pack".
	Kind string
	// Count is the number of restarts in the window.
	Count uint64
	// Points hold the restarts of each sample interval.
	Points []Point
}

// Refusal is the calls or node runs that ended with one code other than
// "ok" over the window.
type Refusal struct {
	// Kind is "call" for host-service calls, "run" for node executions.
	Kind string
	// Code is the result code, or Other.
	Code string
	// Count is the number that ended with Code in the window.
	Count uint64
	// Points hold the count of each sample interval.
	Points []Point
}

// The kinds of Restart and Refusal.
const (
	KindPlugin = "plugin"
	KindPack   = "pack"
	KindCall   = "call"
	KindRun    = "run"
)

// Figures is what the samples in the window show.
type Figures struct {
	// First and Last are the times of the oldest and newest sample in the
	// window; both are zero before the first sample. Rates and counts
	// cover the span between them.
	First, Last time.Time
	// Samples is the number of samples in the window.
	Samples int
	// Families and Capabilities are sorted by name, Other last. They
	// list what moved in the window; with a single sample, what had
	// moved before it.
	Families, Capabilities []Series
	// Runs is all node executions together.
	Runs Series
	// Restarts lists the plugins and packs that restarted in the window,
	// most restarts first.
	Restarts []Restart
	// Refusals lists the codes other than "ok" that calls and runs ended
	// with in the window, most frequent first.
	Refusals []Refusal
	// Error is why the last sample could not read every series, empty
	// when it could.
	Error string
}
