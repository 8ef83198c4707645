package figures

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strings"
)

// Figures computes the figures of the samples in the window.
func (s *Sampler) Figures() Figures {
	s.mu.Lock()
	ring, callBounds, runBounds, lastErr := s.ring, s.callBounds, s.runBounds, s.lastErr
	s.mu.Unlock()

	f := Figures{Samples: len(ring), Error: lastErr}
	if len(ring) == 0 {
		return f
	}
	f.First, f.Last = ring[0].t, ring[len(ring)-1].t
	span := f.Last.Sub(f.First).Seconds()

	for _, label := range labels(ring, dimFamily) {
		f.Families = append(f.Families, traffic(ring, dimFamily, label, callBounds, span))
	}
	for _, label := range labels(ring, dimCapability) {
		f.Capabilities = append(f.Capabilities, traffic(ring, dimCapability, label, callBounds, span))
	}
	f.Runs = traffic(ring, dimRuns, "", runBounds, span)

	for _, k := range []struct {
		d    dim
		kind string
	}{{dimPlugin, KindPlugin}, {dimPack, KindPack}} {
		for _, label := range labels(ring, k.d) {
			if n, points := counts(ring, k.d, label); n > 0 {
				f.Restarts = append(f.Restarts, Restart{Name: label, Kind: k.kind, Count: n, Points: points})
			}
		}
	}
	slices.SortStableFunc(f.Restarts, func(a, b Restart) int { return cmp.Compare(b.Count, a.Count) })

	for _, k := range []struct {
		d    dim
		kind string
	}{{dimCallCode, KindCall}, {dimRunCode, KindRun}} {
		for _, label := range labels(ring, k.d) {
			if n, points := counts(ring, k.d, label); n > 0 {
				f.Refusals = append(f.Refusals, Refusal{Kind: k.kind, Code: label, Count: n, Points: points})
			}
		}
	}
	slices.SortStableFunc(f.Refusals, func(a, b Refusal) int { return cmp.Compare(b.Count, a.Count) })
	return f
}

// labels are the labels of kind d kept at the last sample, by name and
// Other last. A label no longer kept did not move in the window.
func labels(ring []*sample, d dim) []string {
	var out []string
	for label := range ring[len(ring)-1].dims[d] {
		out = append(out, label)
	}
	slices.SortFunc(out, func(a, b string) int {
		if (a == Other) != (b == Other) {
			if a == Other {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	return out
}

// intervals calls fn with what label of kind d did in each interval of the
// ring that ends in a sample keeping it, and the interval's length in
// seconds. A label newly kept starts from zero. The buckets fn is given
// are only valid during the call.
func intervals(ring []*sample, d dim, label string, fn func(i int, moved vals, secs float64)) {
	var buf []float64
	for i := 1; i < len(ring); i++ {
		cur, ok := ring[i].dims[d][label]
		if !ok {
			continue
		}
		before := ring[i-1].dims[d][label]
		moved := vals{n: cur.n - before.n}
		if cur.b != nil {
			if len(buf) != len(cur.b) {
				buf = make([]float64, len(cur.b))
			}
			moved.b = buf
			for j := range cur.b {
				moved.b[j] = cur.b[j]
				if j < len(before.b) {
					moved.b[j] -= before.b[j]
				}
			}
		}
		fn(i, moved, ring[i].t.Sub(ring[i-1].t).Seconds())
	}
}

// traffic is the Series of label of kind d.
func traffic(ring []*sample, d dim, label string, bounds []float64, span float64) Series {
	sr := Series{Name: label}
	var calls float64
	var window []float64
	intervals(ring, d, label, func(i int, moved vals, secs float64) {
		calls += moved.n
		if moved.b != nil {
			if window == nil {
				window = make([]float64, len(moved.b))
			}
			for j := range moved.b {
				window[j] += moved.b[j]
			}
		}
		if secs <= 0 {
			// Two samples at one instant: no rate, and the counts
			// already went into the totals.
			return
		}
		p := Point{Start: ring[i-1].t, End: ring[i].t}
		p.Value = moved.n / secs
		sr.Rate = append(sr.Rate, p)
		if q, ok := quantile(0.5, bounds, moved.b); ok {
			p.Value = q
			sr.P50s = append(sr.P50s, p)
		}
		if q, ok := quantile(0.99, bounds, moved.b); ok {
			p.Value = q
			sr.P99s = append(sr.P99s, p)
		}
	})
	sr.Calls = whole(calls)
	if span > 0 {
		sr.PerSecond = calls / span
	}
	if len(window) > 0 {
		sr.Timed = whole(window[len(window)-1])
	}
	sr.P50, _ = quantile(0.5, bounds, window)
	sr.P99, _ = quantile(0.99, bounds, window)
	return sr
}

// counts is the total and the per-interval counts of label of kind d.
func counts(ring []*sample, d dim, label string) (uint64, []Point) {
	var total float64
	var points []Point
	intervals(ring, d, label, func(i int, moved vals, secs float64) {
		total += moved.n
		if secs > 0 {
			points = append(points, Point{Start: ring[i-1].t, End: ring[i].t, Value: moved.n})
		}
	})
	return whole(total), points
}

func whole(v float64) uint64 {
	if v <= 0 || math.IsNaN(v) {
		return 0
	}
	return uint64(math.Round(v))
}

// quantile estimates the q-quantile of the observations in counts, the
// cumulative count at each of bounds followed by the total. Like
// Prometheus' histogram_quantile it finds the bucket holding the rank
// q*total and interpolates linearly inside it, taking 0 as the lower end
// of the first bucket and the highest finite bound for the +Inf bucket.
// It reports false when there is no observation.
func quantile(q float64, bounds, counts []float64) (float64, bool) {
	if len(counts) != len(bounds)+1 || counts[len(bounds)] <= 0 {
		return 0, false
	}
	rank := q * counts[len(bounds)]
	b := sort.Search(len(bounds), func(i int) bool { return counts[i] >= rank })
	if b == len(bounds) {
		if b == 0 {
			return 0, false
		}
		return bounds[b-1], true
	}
	lower, below := 0.0, 0.0
	if b > 0 {
		lower, below = bounds[b-1], counts[b-1]
	} else if bounds[0] <= 0 {
		return bounds[0], true
	}
	in := counts[b] - below
	if in <= 0 {
		return bounds[b], true
	}
	return lower + (bounds[b]-lower)*(rank-below)/in, true
}
