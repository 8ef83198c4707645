package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// results is what one go test -bench output measured.
type results struct {
	goos, goarch, cpu string
	procs             int // GOMAXPROCS the benchmarks ran at
	// samples holds every reported value, by benchmark and then by metric
	// unit; -count N gives N samples.
	samples map[string]map[string][]float64
}

// metric returns the median of a benchmark's samples of unit, so one
// noisy run of several does not move the figure.
func (r *results) metric(bench, unit string) (float64, bool) {
	xs := r.samples[bench][unit]
	if len(xs) == 0 {
		return 0, false
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	mid := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[mid], true
	}
	return (xs[mid-1] + xs[mid]) / 2, true
}

// parseResults reads go test -bench text output. Lines that are neither
// headers nor results (PASS, ok, logs, --- FAIL) are skipped; name is the
// input's name for errors.
func parseResults(in io.Reader, name string) (*results, error) {
	r := &results{samples: map[string]map[string][]float64{}}
	procsSeen := map[int]bool{}
	// pending is a benchmark whose name was printed but whose results
	// were pushed to a later line by output it wrote while running.
	pending := ""
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.ContainsAny(k, " \t") {
			switch k {
			case "goos":
				r.goos = strings.TrimSpace(v)
				continue
			case "goarch":
				r.goarch = strings.TrimSpace(v)
				continue
			case "cpu":
				if r.cpu == "" {
					r.cpu = strings.TrimSpace(v)
				}
				continue
			case "pkg":
				pending = ""
				continue
			}
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if isVerdict(fields[0]) {
			pending = ""
			continue
		}
		bench := ""
		switch {
		case isBenchmarkName(fields[0]):
			bench, fields = fields[0], fields[1:]
			pending = ""
			if len(fields) > 0 && isVerdict(fields[0]) {
				continue
			}
			if len(fields) == 0 || !isIterations(fields[0]) {
				pending = bench
				continue
			}
		case pending != "" && isIterations(fields[0]):
			bench, pending = pending, ""
		default:
			continue
		}
		metrics, err := parseMetrics(fields[1:])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", name, n, bench, err)
		}
		base, procs := splitProcs(bench)
		procsSeen[procs] = true
		if r.samples[base] == nil {
			r.samples[base] = map[string][]float64{}
		}
		for _, m := range metrics {
			r.samples[base][m.unit] = append(r.samples[base][m.unit], m.value)
		}
		r.procs = procs
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(r.samples) == 0 {
		return nil, fmt.Errorf("%s: no benchmark results", name)
	}
	if len(procsSeen) > 1 {
		// Medians across GOMAXPROCS values would mix different figures.
		ps := make([]int, 0, len(procsSeen))
		for p := range procsSeen {
			ps = append(ps, p)
		}
		slices.Sort(ps)
		return nil, fmt.Errorf("%s: benchmarks ran at GOMAXPROCS %v; give go test a single -cpu value", name, ps)
	}
	return r, nil
}

// measurement is one "value unit" pair of a result line.
type measurement struct {
	value float64
	unit  string
}

// parseMetrics reads the "value unit" pairs after the iteration count.
func parseMetrics(fields []string) ([]measurement, error) {
	if len(fields) == 0 || len(fields)%2 != 0 {
		return nil, fmt.Errorf("want value-unit pairs after the iteration count, got %q", strings.Join(fields, " "))
	}
	ms := make([]measurement, 0, len(fields)/2)
	for i := 0; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return nil, fmt.Errorf("value of %s: %w", fields[i+1], err)
		}
		ms = append(ms, measurement{value: v, unit: fields[i+1]})
	}
	return ms, nil
}

// isBenchmarkName reports whether s names a benchmark the way the testing
// package requires: Benchmark, then nothing or a non-lowercase rune.
func isBenchmarkName(s string) bool {
	rest, ok := strings.CutPrefix(s, "Benchmark")
	if !ok {
		return false
	}
	return rest == "" || !('a' <= rest[0] && rest[0] <= 'z')
}

// isVerdict reports whether a line starting with s ends a benchmark
// without results, or ends the package's output.
func isVerdict(s string) bool {
	return strings.HasPrefix(s, "---") || s == "PASS" || s == "FAIL" || s == "ok"
}

// isIterations reports whether s is a result line's iteration count.
func isIterations(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0
}

// splitProcs splits the -GOMAXPROCS suffix off a benchmark name; go test
// leaves it out when GOMAXPROCS is 1.
func splitProcs(name string) (string, int) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name, 1
	}
	p, err := strconv.Atoi(name[i+1:])
	if err != nil || p < 1 {
		return name, 1
	}
	return name[:i], p
}
