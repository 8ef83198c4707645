package figures

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The series the sampler reads, as core/telemetry names them.
const (
	metricCalls          = "wophost_ctx_calls_total"
	metricCallLatency    = "wophost_ctx_call_duration_seconds"
	metricRuns           = "wophost_node_runs_total"
	metricRunLatency     = "wophost_node_run_duration_seconds"
	metricPluginRestarts = "wophost_plugin_restarts_total"
	metricPackRestarts   = "wophost_pack_restarts_total"
)

// codeOK is the code label of a call or run that succeeded.
const codeOK = "ok"

// The defaults of Options.
const (
	DefaultEvery     = 10 * time.Second
	DefaultWindow    = time.Hour
	DefaultMaxSeries = 32
	// MaxSamples bounds the ring whatever Every and Window say: a day of
	// samples at the default pace.
	MaxSamples = 24*360 + 1
)

// Options set a Sampler's pace, window and bounds.
type Options struct {
	// Every is the time between the samples Run takes; DefaultEvery when
	// zero or negative.
	Every time.Duration
	// Window is how far back the figures reach; DefaultWindow when zero
	// or negative, and never less than Every.
	Window time.Duration
	// Now reads the clock that stamps samples; time.Now when nil.
	Now func() time.Time
	// MaxSeries is how many families, capabilities, plugins, packs, and
	// codes of calls and of runs are each kept apart; the rest of a kind
	// is folded into Other. DefaultMaxSeries when zero or negative.
	MaxSeries int
}

// dim is one kind of label the sampler keeps bounded.
type dim int

const (
	dimFamily dim = iota
	dimCapability
	dimRuns
	dimCallCode
	dimRunCode
	dimPlugin
	dimPack
	numDims
)

// vals are the cumulative values of one kept label.
type vals struct {
	// n counts calls, runs, restarts or refusals.
	n float64
	// b holds cumulative bucket counts, one per upper bound then the
	// +Inf bucket; nil before the label's first timed observation.
	b []float64
}

// moved is how much d records: the count, or the observations when
// there is no count.
func (d vals) moved() float64 {
	if d.n > 0 || len(d.b) == 0 {
		return d.n
	}
	return d.b[len(d.b)-1]
}

func (d *vals) add(o vals) {
	d.n += o.n
	if o.b == nil {
		return
	}
	if d.b == nil {
		d.b = make([]float64, len(o.b))
	}
	for i := range min(len(d.b), len(o.b)) {
		d.b[i] += o.b[i]
	}
}

// kept is one label the sampler keeps apart, or Other.
type kept struct {
	// v is cumulative since the label was kept, and so never decreases
	// even when its series restart.
	v vals
	// active is the time of the last sample in which v moved.
	active time.Time
}

// sample is the kept values at one time. It never changes once in the
// ring.
type sample struct {
	t    time.Time
	dims [numDims]map[string]vals
}

// Sampler samples the host's metrics and keeps a bounded window of
// samples to compute Figures from. It is safe for concurrent use.
//
// Memory stays bounded whatever the traffic: the ring holds at most
// Window/Every+1 samples (and never more than MaxSamples), and each
// sample at most MaxSeries labels of each kind plus Other. A label keeps
// its place while it moves within the window; new labels take free
// places busiest first and the rest are folded into Other; a label that
// did not move in any interval of the window gives its place back.
type Sampler struct {
	g         prometheus.Gatherer
	every     time.Duration
	window    time.Duration
	keep      int
	now       func() time.Time
	maxSeries int

	// sampling serializes Sample and guards the fields after it, which
	// only Sample touches.
	sampling sync.Mutex
	// prev is the raw values of the last gather, by series, to take
	// differences from; it holds only the series that gather returned.
	prev map[string][]float64
	dims [numDims]map[string]*kept

	// mu guards what Figures reads. Sample replaces ring rather than
	// changing it, so Figures reads a ring it took without holding mu.
	mu         sync.Mutex
	ring       []*sample
	callBounds []float64
	runBounds  []float64
	lastErr    string
}

// NewSampler returns a sampler of g's series with opts; it takes no
// sample until Sample or Run.
func NewSampler(g prometheus.Gatherer, opts Options) *Sampler {
	if opts.Every <= 0 {
		opts.Every = DefaultEvery
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	opts.Window = max(opts.Window, opts.Every)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxSeries <= 0 {
		opts.MaxSeries = DefaultMaxSeries
	}
	keep := MaxSamples
	if n := opts.Window / opts.Every; n < MaxSamples-1 {
		keep = int(n) + 1
	}
	s := &Sampler{
		g:         g,
		every:     opts.Every,
		window:    opts.Window,
		keep:      keep,
		now:       opts.Now,
		maxSeries: opts.MaxSeries,
		prev:      map[string][]float64{},
	}
	for d := range s.dims {
		s.dims[d] = map[string]*kept{}
	}
	return s
}

// Run takes a sample at once and then every Options.Every until ctx
// ends. A sample's error is kept for Figures.Error.
func (s *Sampler) Run(ctx context.Context) {
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	for {
		_ = s.Sample() // kept in Figures.Error
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Sample gathers the metrics now and adds a sample to the window. When
// the gatherer fails, what it did return is still sampled and the error
// is returned and kept for Figures.Error.
func (s *Sampler) Sample() error {
	s.sampling.Lock()
	defer s.sampling.Unlock()
	if s.g == nil {
		err := errors.New("figures: sampler has no gatherer")
		s.mu.Lock()
		s.lastErr = err.Error()
		s.mu.Unlock()
		return err
	}
	now := s.now()
	mfs, gerr := s.g.Gather()
	if gerr != nil {
		gerr = fmt.Errorf("figures: gather metrics: %w", gerr)
	}
	moved := s.differences(mfs)

	// The ring after this sample: the samples no older than the window,
	// at most keep in all, the new one last.
	old := s.ring
	from := 0
	for from < len(old) && old[from].t.Before(now.Add(-s.window)) {
		from++
	}
	from = max(from, len(old)+1-s.keep)
	oldest := now
	if from < len(old) {
		oldest = old[from].t
	}

	snap := &sample{t: now}
	for d := range s.dims {
		s.fold(dim(d), moved[d], now, oldest)
		snap.dims[d] = make(map[string]vals, len(s.dims[d]))
		for label, k := range s.dims[d] {
			snap.dims[d][label] = vals{n: k.v.n, b: slices.Clone(k.v.b)}
		}
	}
	ring := make([]*sample, 0, len(old)-from+1)
	ring = append(ring, old[from:]...)
	ring = append(ring, snap)

	s.mu.Lock()
	s.ring = ring
	s.lastErr = ""
	if gerr != nil {
		s.lastErr = gerr.Error()
	}
	s.mu.Unlock()
	return gerr
}

// fold adds what moved of kind d since the last sample to the kept
// labels: it first frees the places of labels that did not move in any
// interval still in the window (the one ending at oldest is not), then
// keeps new labels busiest first while places remain, and adds the rest
// to Other.
func (s *Sampler) fold(d dim, moved map[string]vals, now, oldest time.Time) {
	keptOf := s.dims[d]
	for label, k := range keptOf {
		if moved[label].moved() == 0 && !k.active.After(oldest) {
			delete(keptOf, label)
		}
	}
	var fresh []string
	for label, v := range moved {
		if _, ok := keptOf[label]; !ok && v.moved() > 0 {
			fresh = append(fresh, label)
		}
	}
	slices.SortFunc(fresh, func(a, b string) int {
		if c := cmp.Compare(moved[b].moved(), moved[a].moved()); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	places := s.maxSeries - len(keptOf)
	if _, ok := keptOf[Other]; ok {
		places++
	}
	for _, label := range fresh {
		if places <= 0 {
			break
		}
		keptOf[label] = &kept{}
		places--
	}
	for label, v := range moved {
		k, ok := keptOf[label]
		if !ok {
			if v.moved() == 0 {
				continue
			}
			if k, ok = keptOf[Other]; !ok {
				k = &kept{}
				keptOf[Other] = k
			}
		}
		k.v.add(v)
		if v.moved() > 0 {
			k.active = now
		}
	}
}

// differences reads the gathered series and returns, by kind and label,
// how much each moved since the last gather, and remembers their values
// for the next. A series that went down was restarted, and moved by its
// whole value; one not seen before moved by its whole value too.
func (s *Sampler) differences(mfs []*dto.MetricFamily) [numDims]map[string]vals {
	var moved [numDims]map[string]vals
	for d := range moved {
		moved[d] = map[string]vals{}
	}
	add := func(d dim, label string, v vals) {
		m := moved[d][label]
		m.add(v)
		moved[d][label] = m
	}
	prev := s.prev
	s.prev = make(map[string][]float64, len(prev))
	diff := func(key string, cur []float64) []float64 {
		s.prev[key] = cur
		p, ok := prev[key]
		if !ok || len(p) != len(cur) {
			return cur
		}
		out := make([]float64, len(cur))
		for i := range cur {
			if cur[i] < p[i] {
				return cur
			}
			out[i] = cur[i] - p[i]
		}
		return out
	}
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			key := seriesKey(name, m)
			switch name {
			case metricCalls:
				fam, meth, code := label(m, "family"), label(m, "method"), label(m, "code")
				v := vals{n: diff(key, []float64{m.GetCounter().GetValue()})[0]}
				add(dimFamily, fam, v)
				add(dimCapability, fam+"."+meth, v)
				if code != codeOK {
					add(dimCallCode, code, v)
				}
			case metricCallLatency:
				b := s.buckets(&s.callBounds, m.GetHistogram())
				if b == nil {
					continue
				}
				v := vals{b: diff(key, b)}
				fam, meth := label(m, "family"), label(m, "method")
				add(dimFamily, fam, v)
				add(dimCapability, fam+"."+meth, v)
			case metricRuns:
				v := vals{n: diff(key, []float64{m.GetCounter().GetValue()})[0]}
				add(dimRuns, "", v)
				if code := label(m, "code"); code != codeOK {
					add(dimRunCode, code, v)
				}
			case metricRunLatency:
				b := s.buckets(&s.runBounds, m.GetHistogram())
				if b == nil {
					continue
				}
				add(dimRuns, "", vals{b: diff(key, b)})
			case metricPluginRestarts:
				add(dimPlugin, label(m, "capability"), vals{n: diff(key, []float64{m.GetCounter().GetValue()})[0]})
			case metricPackRestarts:
				add(dimPack, label(m, "pack"), vals{n: diff(key, []float64{m.GetCounter().GetValue()})[0]})
			}
		}
	}
	return moved
}

// buckets returns h's cumulative counts laid out on *bounds, the first
// layout seen for the metric, with the total last. A histogram with other
// bounds is counted, for each bound, up to its own largest bound not
// above it. It returns nil for a series that is no histogram.
func (s *Sampler) buckets(bounds *[]float64, h *dto.Histogram) []float64 {
	if h == nil {
		return nil
	}
	var own []float64
	var counts []float64
	for _, b := range h.GetBucket() {
		if math.IsInf(b.GetUpperBound(), +1) {
			continue
		}
		own = append(own, b.GetUpperBound())
		counts = append(counts, float64(b.GetCumulativeCount()))
	}
	if *bounds == nil {
		s.mu.Lock()
		*bounds = own
		s.mu.Unlock()
	}
	out := make([]float64, len(*bounds)+1)
	out[len(*bounds)] = float64(h.GetSampleCount())
	if slices.Equal(own, *bounds) {
		copy(out, counts)
		return out
	}
	j := 0
	for i, ub := range *bounds {
		for j < len(own) && own[j] <= ub {
			j++
		}
		if j > 0 {
			out[i] = counts[j-1]
		}
	}
	return out
}

// seriesKey names one series: its metric and label values, which the
// gatherer sorts by label name.
func seriesKey(name string, m *dto.Metric) string {
	var b strings.Builder
	b.WriteString(name)
	for _, l := range m.GetLabel() {
		b.WriteByte(0xff)
		b.WriteString(l.GetValue())
	}
	return b.String()
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
