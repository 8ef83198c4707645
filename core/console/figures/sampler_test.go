package figures

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// hostMetrics is the part of core/telemetry's metric set the figures
// read, with the same names, labels and buckets.
type hostMetrics struct {
	reg         *prometheus.Registry
	calls       *prometheus.CounterVec
	callLatency *prometheus.HistogramVec
	runs        *prometheus.CounterVec
	runLatency  *prometheus.HistogramVec
	plugins     *prometheus.CounterVec
	packs       *prometheus.CounterVec
}

var testBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

func newHostMetrics() *hostMetrics {
	m := &hostMetrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wophost_ctx_calls_total", Help: "h"},
			[]string{"family", "method", "code"}),
		callLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "wophost_ctx_call_duration_seconds", Help: "h", Buckets: testBuckets},
			[]string{"family", "method"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wophost_node_runs_total", Help: "h"},
			[]string{"type_id", "code"}),
		runLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "wophost_node_run_duration_seconds", Help: "h", Buckets: testBuckets},
			[]string{"type_id"}),
		plugins: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wophost_plugin_restarts_total", Help: "h"},
			[]string{"capability"}),
		packs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wophost_pack_restarts_total", Help: "h"},
			[]string{"pack"}),
	}
	m.reg.MustRegister(m.calls, m.callLatency, m.runs, m.runLatency, m.plugins, m.packs)
	return m
}

// call records n calls of family.method ending with code, each taking d.
func (m *hostMetrics) call(family, method, code string, n int, d time.Duration) {
	for range n {
		m.callLatency.WithLabelValues(family, method).Observe(d.Seconds())
		m.calls.WithLabelValues(family, method, code).Inc()
	}
}

func (m *hostMetrics) run(typeID, code string, n int, d time.Duration) {
	for range n {
		m.runLatency.WithLabelValues(typeID).Observe(d.Seconds())
		m.runs.WithLabelValues(typeID, code).Inc()
	}
}

// clock is a fake clock that moves only when told.
type clock struct{ t time.Time }

func newClock() *clock { return &clock{t: time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)} }

func (c *clock) now() time.Time         { return c.t }
func (c *clock) step(d time.Duration)   { c.t = c.t.Add(d) }
func (c *clock) at(i int) time.Time     { return c.t.Add(time.Duration(i) * 10 * time.Second) }
func sampleOK(t *testing.T, s *Sampler) { t.Helper(); must(t, s.Sample()) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func seriesNamed(t *testing.T, list []Series, name string) Series {
	t.Helper()
	for _, s := range list {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no series %q among %v", name, names(list))
	return Series{}
}

func names(list []Series) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Name)
	}
	return out
}

func values(points []Point) []float64 {
	var out []float64
	for _, p := range points {
		out = append(out, p.Value)
	}
	return out
}

func sameValues(t *testing.T, what string, got []Point, want ...float64) {
	t.Helper()
	g := values(got)
	if len(g) != len(want) {
		t.Fatalf("%s: %v, want %v", what, g, want)
	}
	for i := range want {
		if math.Abs(g[i]-want[i]) > 1e-9 {
			t.Fatalf("%s: %v, want %v", what, g, want)
		}
	}
}

func TestRatesAreWhatWasAddedPerInterval(t *testing.T) {
	m := newHostMetrics()
	c := newClock()
	s := NewSampler(m.reg, Options{Now: c.now})
	// Calls before the first sample are no interval's.
	m.call("kv", "get", "ok", 1000, time.Millisecond)
	sampleOK(t, s)
	start := c.now()
	for _, n := range [][2]int{{10, 0}, {20, 3}, {0, 0}, {5, 7}} {
		m.call("kv", "get", "ok", n[0], time.Millisecond)
		m.call("kv", "put", "ok", n[1], time.Millisecond)
		c.step(10 * time.Second)
		sampleOK(t, s)
	}
	f := s.Figures()
	if f.Samples != 5 || !f.First.Equal(start) || !f.Last.Equal(start.Add(40*time.Second)) {
		t.Fatalf("samples %d from %v to %v", f.Samples, f.First, f.Last)
	}
	get := seriesNamed(t, f.Capabilities, "kv.get")
	sameValues(t, "kv.get rate", get.Rate, 1, 2, 0, 0.5)
	if get.Calls != 35 || math.Abs(get.PerSecond-35.0/40) > 1e-9 {
		t.Errorf("kv.get: %d calls, %v/s; want 35, 0.875/s", get.Calls, get.PerSecond)
	}
	// kv.put first moved in the second interval: from there on, from zero.
	put := seriesNamed(t, f.Capabilities, "kv.put")
	sameValues(t, "kv.put rate", put.Rate, 0.3, 0, 0.7)
	if put.Calls != 10 {
		t.Errorf("kv.put: %d calls, want 10", put.Calls)
	}
	kv := seriesNamed(t, f.Families, "kv")
	sameValues(t, "kv rate", kv.Rate, 1, 2.3, 0, 1.2)
	if kv.Calls != 45 || kv.Timed != 45 {
		t.Errorf("kv: %d calls, %d timed; want 45, 45", kv.Calls, kv.Timed)
	}
	for i, p := range kv.Rate {
		if !p.Start.Equal(c.at(i-4)) || !p.End.Equal(c.at(i-3)) {
			t.Errorf("point %d spans %v to %v", i, p.Start, p.End)
		}
	}
}

func TestLatencyQuantilesFromBucketDifferences(t *testing.T) {
	m := newHostMetrics()
	c := newClock()
	s := NewSampler(m.reg, Options{Now: c.now})
	m.call("kv", "get", "ok", 500, 20*time.Second) // before the window: must not count
	sampleOK(t, s)
	m.call("kv", "get", "ok", 100, 3*time.Millisecond)
	c.step(10 * time.Second)
	sampleOK(t, s)
	m.call("kv", "get", "ok", 90, 700*time.Microsecond)
	m.call("kv", "get", "ok", 10, 7*time.Second)
	c.step(10 * time.Second)
	sampleOK(t, s)
	c.step(10 * time.Second) // no call: a rate of 0 and no latency point
	sampleOK(t, s)

	get := seriesNamed(t, s.Figures().Capabilities, "kv.get")
	sameValues(t, "rate", get.Rate, 10, 10, 0)
	if len(get.P50s) != 2 || len(get.P99s) != 2 {
		t.Fatalf("latency points %v %v, want two each: none for the idle interval", values(get.P50s), values(get.P99s))
	}
	inside := func(what string, v, lo, hi float64) {
		t.Helper()
		if v <= lo || v > hi {
			t.Errorf("%s = %v, want in (%v, %v]", what, v, lo, hi)
		}
	}
	inside("first p50", get.P50s[0].Value, .0025, .005)
	inside("first p99", get.P99s[0].Value, .0025, .005)
	inside("second p50", get.P50s[1].Value, .0005, .001)
	inside("second p99", get.P99s[1].Value, 5, 10)
	// Rank 99 of 100 is the 9th of the 10 in (5, 10]: 5 + 5*9/10.
	if got := get.P99s[1].Value; math.Abs(got-9.5) > 1e-9 {
		t.Errorf("second p99 = %v, want 9.5 by linear interpolation", got)
	}
	if !get.P50s[1].End.Equal(get.P50s[0].End.Add(10 * time.Second)) {
		t.Errorf("latency points at %v and %v", get.P50s[0].End, get.P50s[1].End)
	}
	// Over the window: 200 timed, 190 at most 5 ms.
	if get.Timed != 200 {
		t.Errorf("timed %d, want 200", get.Timed)
	}
	inside("window p50", get.P50, .0025, .005)
	inside("window p99", get.P99, 5, 10)
}

func TestQuantile(t *testing.T) {
	bounds := []float64{1, 2, 4}
	for _, c := range []struct {
		q      float64
		counts []float64
		want   float64
		ok     bool
	}{
		{0.5, []float64{0, 0, 0, 0}, 0, false},
		{0.5, []float64{10, 10, 10, 10}, 0.5, true}, // first bucket starts at 0
		{0.5, []float64{0, 10, 10, 10}, 1.5, true},  // halfway through (1, 2]
		{0.75, []float64{0, 0, 4, 4}, 3.5, true},    // rank 3 of 4 in (2, 4]
		{0.99, []float64{1, 1, 1, 100}, 4, true},    // the +Inf bucket: the highest bound
		{0.5, []float64{1, 2, 3}, 0, false},         // the wrong layout
		{0.5, []float64{2, 2, 2, 2}, 0.5, true},     // rank 1 of 2
		{0.99, []float64{0, 100, 100, 100}, 1.99, true},
	} {
		got, ok := quantile(c.q, bounds, c.counts)
		if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile(%v, %v) = %v, %v; want %v, %v", c.q, c.counts, got, ok, c.want, c.ok)
		}
	}
}

// swapGatherer gathers from whichever registry is current, as the host's
// metrics after a process restart would.
type swapGatherer struct {
	mu sync.Mutex
	m  *hostMetrics
}

func (g *swapGatherer) Gather() ([]*dto.MetricFamily, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m.reg.Gather()
}

func TestCounterResetGivesNoNegativeRate(t *testing.T) {
	g := &swapGatherer{m: newHostMetrics()}
	c := newClock()
	s := NewSampler(g, Options{Now: c.now})
	sampleOK(t, s)
	g.m.call("kv", "get", "ok", 50, 3*time.Millisecond)
	g.m.run("demo.echo", "ok", 40, time.Millisecond)
	g.m.plugins.WithLabelValues("demo.echo").Add(4)
	c.step(10 * time.Second)
	sampleOK(t, s)

	// Everything starts again from zero and moves a little.
	g.mu.Lock()
	g.m = newHostMetrics()
	g.mu.Unlock()
	g.m.call("kv", "get", "ok", 5, 40*time.Second)
	g.m.run("demo.echo", "ok", 2, time.Millisecond)
	g.m.plugins.WithLabelValues("demo.echo").Add(1)
	c.step(10 * time.Second)
	sampleOK(t, s)
	g.m.call("kv", "get", "ok", 10, 3*time.Millisecond)
	c.step(10 * time.Second)
	sampleOK(t, s)

	f := s.Figures()
	get := seriesNamed(t, f.Capabilities, "kv.get")
	sameValues(t, "kv.get rate", get.Rate, 5, 0.5, 1)
	if get.Calls != 65 || get.Timed != 65 {
		t.Errorf("kv.get: %d calls, %d timed; want 65", get.Calls, get.Timed)
	}
	// The restarted histogram's 5 slow calls are the interval's latency.
	if p := get.P50s[1].Value; p <= 30 || p > 60 {
		t.Errorf("p50 after the reset %v, want in (30, 60]", p)
	}
	sameValues(t, "runs rate", f.Runs.Rate, 4, 0.2, 0)
	if len(f.Restarts) != 1 || f.Restarts[0].Count != 5 {
		t.Fatalf("restarts %+v, want demo.echo 5", f.Restarts)
	}
	sameValues(t, "restarts", f.Restarts[0].Points, 4, 1, 0)
	for _, sr := range append(append([]Series{f.Runs}, f.Families...), f.Capabilities...) {
		for _, p := range sr.Rate {
			if p.Value < 0 {
				t.Errorf("%q: negative rate %v", sr.Name, p.Value)
			}
		}
	}
}

func TestTheRingKeepsTheWindow(t *testing.T) {
	for _, c := range []struct {
		name   string
		step   time.Duration
		n      int
		want   int
		spanOK time.Duration
	}{
		// Window/Every+1 samples at the pace of Run, not one more.
		{"at Every", 10 * time.Second, 30, 7, time.Minute},
		// Faster than Every: no more than Window/Every+1 all the same.
		{"faster", time.Second, 30, 7, 6 * time.Second},
		// Slower: what is older than the window goes.
		{"slower", 25 * time.Second, 30, 3, 50 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newHostMetrics()
			clk := newClock()
			s := NewSampler(m.reg, Options{Every: 10 * time.Second, Window: time.Minute, Now: clk.now})
			for i := range c.n {
				if i > 0 {
					clk.step(c.step)
				}
				m.call("kv", "get", "ok", 1, time.Millisecond)
				sampleOK(t, s)
			}
			f := s.Figures()
			if f.Samples != c.want || f.Last.Sub(f.First) != c.spanOK || !f.Last.Equal(clk.now()) {
				t.Fatalf("%d samples over %v, want %d over %v", f.Samples, f.Last.Sub(f.First), c.want, c.spanOK)
			}
			if got := len(seriesNamed(t, f.Families, "kv").Rate); got != c.want-1 {
				t.Errorf("%d rate points, want %d", got, c.want-1)
			}
		})
	}
}

func TestRefusalsGroupByCodeWithoutOK(t *testing.T) {
	m := newHostMetrics()
	c := newClock()
	s := NewSampler(m.reg, Options{Now: c.now})
	m.call("kv", "get", "not_found", 100, time.Millisecond) // before the window
	sampleOK(t, s)
	m.call("kv", "get", "ok", 50, time.Millisecond)
	m.call("kv", "get", "not_found", 3, time.Millisecond)
	m.call("blob", "put", "not_found", 2, time.Millisecond)
	m.call("kv", "put", "permission_denied", 1, time.Millisecond)
	m.run("demo.echo", "ok", 20, time.Millisecond)
	m.run("demo.echo", "sandbox_timeout", 4, time.Millisecond)
	m.run("demo.slow", "not_found", 1, time.Millisecond)
	c.step(10 * time.Second)
	sampleOK(t, s)
	m.call("kv", "get", "not_found", 1, time.Millisecond)
	c.step(10 * time.Second)
	sampleOK(t, s)

	got := map[string]uint64{}
	for _, r := range s.Figures().Refusals {
		got[r.Kind+" "+r.Code] = r.Count
		if r.Kind == KindCall && r.Code == "not_found" {
			sameValues(t, "not_found points", r.Points, 5, 1)
		}
	}
	want := map[string]uint64{
		"call not_found": 6, "call permission_denied": 1,
		"run sandbox_timeout": 4, "run not_found": 1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("refusals %v, want %v", got, want)
	}
	if refusals := s.Figures().Refusals; refusals[0].Count != 6 || refusals[1].Count != 4 {
		t.Errorf("refusals not most frequent first: %+v", refusals)
	}
}

func TestRestartsOfPluginsAndPacks(t *testing.T) {
	m := newHostMetrics()
	c := newClock()
	s := NewSampler(m.reg, Options{Now: c.now})
	m.plugins.WithLabelValues("demo.echo").Add(9) // before the window
	m.packs.WithLabelValues("quiet")              // never restarts
	sampleOK(t, s)
	m.plugins.WithLabelValues("demo.echo").Inc()
	m.packs.WithLabelValues("kvdemo").Add(2)
	c.step(10 * time.Second)
	sampleOK(t, s)
	m.packs.WithLabelValues("kvdemo").Inc()
	c.step(10 * time.Second)
	sampleOK(t, s)

	f := s.Figures()
	if len(f.Restarts) != 2 {
		t.Fatalf("restarts %+v, want kvdemo and demo.echo", f.Restarts)
	}
	if r := f.Restarts[0]; r.Name != "kvdemo" || r.Kind != KindPack || r.Count != 3 {
		t.Errorf("first restart %+v, want pack kvdemo 3", r)
	} else {
		sameValues(t, "kvdemo", r.Points, 2, 1)
	}
	if r := f.Restarts[1]; r.Name != "demo.echo" || r.Kind != KindPlugin || r.Count != 1 {
		t.Errorf("second restart %+v, want plugin demo.echo 1", r)
	}
}

func TestLabelsAreBoundedAndFoldIntoOther(t *testing.T) {
	m := newHostMetrics()
	c := newClock()
	s := NewSampler(m.reg, Options{Every: 10 * time.Second, Window: time.Minute, Now: c.now, MaxSeries: 3})
	sampleOK(t, s)
	// Ten methods, the busiest with the highest number.
	for i := range 10 {
		m.call("kv", fmt.Sprintf("m%d", i), "ok", i+1, time.Millisecond)
	}
	c.step(10 * time.Second)
	sampleOK(t, s)
	f := s.Figures()
	if got := fmt.Sprint(names(f.Capabilities)); got != "[kv.m7 kv.m8 kv.m9 (other)]" {
		t.Fatalf("capabilities %s, want the three busiest and Other", got)
	}
	if other := seriesNamed(t, f.Capabilities, Other); other.Calls != 1+2+3+4+5+6+7 || other.Timed != other.Calls {
		t.Errorf("other: %d calls, %d timed; want 28", other.Calls, other.Timed)
	}
	// A kept label keeps its place while it moves in the window, even
	// when a busier one comes.
	m.call("kv", "m9", "ok", 1, time.Millisecond)
	m.call("kv", "m8", "ok", 1, time.Millisecond)
	m.call("kv", "m7", "ok", 1, time.Millisecond)
	m.call("kv", "new", "ok", 100, time.Millisecond)
	c.step(10 * time.Second)
	sampleOK(t, s)
	f = s.Figures()
	if got := fmt.Sprint(names(f.Capabilities)); got != "[kv.m7 kv.m8 kv.m9 (other)]" {
		t.Fatalf("capabilities %s, want the places kept", got)
	}
	sameValues(t, "other", seriesNamed(t, f.Capabilities, Other).Rate, 2.8, 10)
	// m7 stops; once none of its moves is in the window it gives its
	// place to the busiest that moves next.
	for range 5 {
		m.call("kv", "m9", "ok", 1, time.Millisecond)
		m.call("kv", "m8", "ok", 1, time.Millisecond)
		m.call("kv", "new", "ok", 1, time.Millisecond)
		c.step(10 * time.Second)
		sampleOK(t, s)
		if got := fmt.Sprint(names(s.Figures().Capabilities)); got != "[kv.m7 kv.m8 kv.m9 (other)]" {
			t.Fatalf("capabilities %s while m7's calls are in the window", got)
		}
	}
	m.call("kv", "late", "ok", 5, time.Millisecond)
	m.call("kv", "new", "ok", 1, time.Millisecond)
	c.step(10 * time.Second)
	sampleOK(t, s)
	f = s.Figures()
	if got := fmt.Sprint(names(f.Capabilities)); got != "[kv.late kv.m8 kv.m9 (other)]" {
		t.Fatalf("capabilities %s, want m7's place to late", got)
	}
	sameValues(t, "late", seriesNamed(t, f.Capabilities, "kv.late").Rate, 0.5)
	// The family saw every call in the window all along.
	if kv := seriesNamed(t, f.Families, "kv"); kv.Calls != 5*3+5+1 {
		t.Errorf("kv: %d calls in the window, want 21", kv.Calls)
	}
}

func TestSampleErrors(t *testing.T) {
	s := NewSampler(nil, Options{})
	if err := s.Sample(); err == nil || s.Figures().Error == "" {
		t.Fatalf("sampled without a gatherer: %v", err)
	}
	m := newHostMetrics()
	m.call("kv", "get", "ok", 1, time.Millisecond)
	fail := true
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := m.reg.Gather()
		if fail {
			return mfs, errors.New("collector broke")
		}
		return mfs, err
	})
	c := newClock()
	s = NewSampler(g, Options{Now: c.now})
	if err := s.Sample(); err == nil {
		t.Fatal("a failed gather gave no error")
	}
	m.call("kv", "get", "ok", 4, time.Millisecond)
	c.step(10 * time.Second)
	fail = false
	sampleOK(t, s)
	f := s.Figures()
	if f.Error != "" {
		t.Errorf("error %q kept after a good sample", f.Error)
	}
	// What the failed gather returned was sampled all the same.
	sameValues(t, "rate", seriesNamed(t, f.Families, "kv").Rate, 0.4)
}

func TestOptionsDefaults(t *testing.T) {
	s := NewSampler(newHostMetrics().reg, Options{Every: -1, Window: -1, MaxSeries: -1})
	if s.every != DefaultEvery || s.window != DefaultWindow || s.keep != 361 || s.maxSeries != DefaultMaxSeries {
		t.Errorf("every %v window %v keep %d max %d", s.every, s.window, s.keep, s.maxSeries)
	}
	if s = NewSampler(nil, Options{Every: time.Minute, Window: time.Second}); s.window != time.Minute || s.keep != 2 {
		t.Errorf("a window below Every: %v, keep %d", s.window, s.keep)
	}
	if s = NewSampler(nil, Options{Every: time.Millisecond, Window: 24 * time.Hour}); s.keep != MaxSamples {
		t.Errorf("keep %d, want the bound %d", s.keep, MaxSamples)
	}
}

func TestRunAndFiguresConcurrently(t *testing.T) {
	m := newHostMetrics()
	s := NewSampler(m.reg, Options{Every: time.Millisecond, Window: time.Second, MaxSeries: 4})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx) })
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			m.call("kv", fmt.Sprintf("m%d", i%7), "ok", 1, time.Millisecond)
			m.run("demo.echo", "sandbox_timeout", 1, time.Millisecond)
			m.plugins.WithLabelValues("demo.echo").Inc()
			time.Sleep(50 * time.Microsecond)
		}
	})
	deadline := time.Now().Add(300 * time.Millisecond)
	var f Figures
	for time.Now().Before(deadline) {
		f = s.Figures()
		for _, sr := range f.Capabilities {
			_ = Chart(ChartSpec{Label: sr.Name, Points: sr.Rate})
		}
	}
	cancel()
	wg.Wait()
	if f.Samples < 2 || len(f.Capabilities) == 0 || len(f.Capabilities) > 5 {
		t.Errorf("%d samples, capabilities %v", f.Samples, names(f.Capabilities))
	}
}

func BenchmarkSample200Series(b *testing.B) {
	m := newHostMetrics()
	// 40 capabilities with calls and latency (120 counters and 40
	// histograms), 40 node types: about 200 series.
	for i := range 40 {
		fam, meth := fmt.Sprintf("f%d", i%8), fmt.Sprintf("m%d", i)
		m.call(fam, meth, "ok", 3, time.Millisecond)
		m.call(fam, meth, "not_found", 1, time.Millisecond)
		m.call(fam, meth, "deadline_exceeded", 1, time.Second)
		m.run(fmt.Sprintf("t%d", i), "ok", 1, time.Millisecond)
	}
	c := newClock()
	s := NewSampler(m.reg, Options{Now: c.now})
	b.ReportAllocs()
	for b.Loop() {
		m.calls.WithLabelValues("f1", "m1", "ok").Inc()
		c.step(10 * time.Second)
		if err := s.Sample(); err != nil {
			b.Fatal(err)
		}
	}
}

func TestHistogramOfOtherBucketsIsLaidOnTheFirst(t *testing.T) {
	g := &swapGatherer{m: newHostMetrics()}
	c := newClock()
	s := NewSampler(g, Options{Now: c.now})
	g.m.call("kv", "get", "ok", 100, 3*time.Millisecond)
	sampleOK(t, s)

	// A host built with coarser buckets takes over.
	other := prometheus.NewRegistry()
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wophost_ctx_calls_total", Help: "h"},
		[]string{"family", "method", "code"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "wophost_ctx_call_duration_seconds", Help: "h",
		Buckets: []float64{.001, .01, .1, 1}}, []string{"family", "method"})
	other.MustRegister(calls, latency)
	for range 10 {
		calls.WithLabelValues("kv", "get", "ok").Inc()
		latency.WithLabelValues("kv", "get").Observe(.05)
	}
	g.mu.Lock()
	g.m = &hostMetrics{reg: other}
	g.mu.Unlock()
	c.step(10 * time.Second)
	sampleOK(t, s)

	get := seriesNamed(t, s.Figures().Capabilities, "kv.get")
	if get.Timed != 10 || len(get.P50s) != 1 {
		t.Fatalf("timed %d, p50 points %v", get.Timed, values(get.P50s))
	}
	// All ten are at most 0.1 and above 0.01; on the first layout, at
	// most 0.1 and above 0.05.
	if p := get.P50s[0].Value; p <= .05 || p > .1 {
		t.Errorf("p50 %v, want in (0.05, 0.1]", p)
	}
}

func BenchmarkFiguresOfAFullWindow(b *testing.B) {
	m := newHostMetrics()
	c := newClock()
	s := NewSampler(m.reg, Options{Now: c.now})
	for i := range 362 {
		for j := range 40 {
			m.call(fmt.Sprintf("f%d", j%8), fmt.Sprintf("m%d", j), "ok", i%3+1, time.Millisecond)
		}
		c.step(10 * time.Second)
		if err := s.Sample(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if f := s.Figures(); len(f.Capabilities) != DefaultMaxSeries+1 {
			b.Fatalf("%d capabilities", len(f.Capabilities))
		}
	}
}
