package main

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/wophost/wophost/internal/atomicfile"
)

// The table lives between these markers in a document such as
// BENCHMARKS.md, so the prose around it stays the author's.
const (
	beginMarker = "<!-- benchreport:begin -->"
	endMarker   = "<!-- benchreport:end -->"
)

// Column headers; -compare finds the committed columns by these names.
const (
	colFigure   = "Figure"
	colValue    = "Value"
	colBaseline = "Baseline"
	colRatio    = "Ratio"
	colGoal     = "Goal"
	colMet      = "Met"
)

// none fills a cell that has nothing to say.
const none = "—"

// notMeasured fills the Value cell of a figure the input lacks.
const notMeasured = "not measured"

// row is one figure as measured. Numbers are as shown in the table.
type row struct {
	fig                             figure
	value, baseline, ratio          float64
	hasValue, hasBaseline, hasRatio bool
}

// measure looks every figure up in r.
func measure(r *results, figs []figure) []row {
	rows := make([]row, 0, len(figs))
	for _, f := range figs {
		w := row{fig: f}
		v, ok := r.metric(f.bench, f.value)
		if !ok {
			rows = append(rows, w)
			continue
		}
		w.value, w.hasValue = f.show.shown(v), true
		var b float64
		if f.baseline != "" {
			b, w.hasBaseline = r.metric(f.bench, f.baseline)
			w.baseline = f.show.shown(b)
		}
		switch {
		case f.ratioMetric != "":
			var x float64
			if x, w.hasRatio = r.metric(f.bench, f.ratioMetric); w.hasRatio {
				w.ratio = ratioFormat().shown(x)
			}
		case w.hasBaseline && b != 0:
			// Raw metrics, not shown ones, so rounding does not skew it.
			w.ratio, w.hasRatio = ratioFormat().shown(v/b), true
		}
		rows = append(rows, w)
	}
	return rows
}

// guardedColumn is the column the regression guard compares.
func (f figure) guardedColumn() string {
	if f.hasRatio() {
		return colRatio
	}
	return colValue
}

// guarded returns the number the regression guard compares.
func (w row) guarded() (float64, bool) {
	if w.fig.hasRatio() {
		return w.ratio, w.hasRatio
	}
	return w.value, w.hasValue
}

// guardedText shows the guarded number as its column does.
func (w row) guardedText() string {
	if w.fig.hasRatio() {
		return w.ratioCell()
	}
	return w.valueCell()
}

func (w row) valueCell() string {
	if !w.hasValue {
		return notMeasured
	}
	return w.fig.show.text(w.value)
}

func (w row) baselineCell() string {
	if !w.hasBaseline {
		return none
	}
	return w.fig.baselineLabel + " " + w.fig.show.text(w.baseline)
}

func (w row) ratioCell() string {
	if !w.hasRatio {
		return none
	}
	return ratioFormat().text(w.ratio)
}

func (w row) goalCell() string {
	g := w.fig.goal
	if g == nil {
		return none
	}
	op := "≥"
	if g.atMost {
		op = "≤"
	}
	s := op + " " + strconv.FormatFloat(g.limit, 'f', -1, 64)
	if (g.onValue || !w.fig.hasRatio()) && w.fig.show.unit != "" {
		s += " " + w.fig.show.unit
	}
	return s
}

func (w row) metCell() string {
	g := w.fig.goal
	if g == nil {
		return none
	}
	x, ok := w.ratio, w.hasRatio
	if g.onValue || !w.fig.hasRatio() {
		x, ok = w.value, w.hasValue
	}
	switch {
	case !ok:
		return none
	case g.atMost && x <= g.limit, !g.atMost && x >= g.limit:
		return "yes"
	default:
		return "no"
	}
}

// render returns the report: where it was measured, a blank line, then
// the table. It holds no date or duration, so the same input gives the
// same bytes.
func render(r *results, rows []row) string {
	var b strings.Builder
	b.WriteString(machineLine(r))
	b.WriteString("\n\n")
	cells := [][]string{{colFigure, colValue, colBaseline, colRatio, colGoal, colMet}}
	for _, w := range rows {
		cells = append(cells, []string{w.fig.name, w.valueCell(), w.baselineCell(), w.ratioCell(), w.goalCell(), w.metCell()})
	}
	writeTable(&b, cells)
	return b.String()
}

// machineLine says what the figures were measured on; they mean little
// without it.
func machineLine(r *results) string {
	var parts []string
	switch {
	case r.goos != "" && r.goarch != "":
		parts = append(parts, r.goos+"/"+r.goarch)
	case r.goos != "" || r.goarch != "":
		parts = append(parts, r.goos+r.goarch)
	}
	if r.cpu != "" {
		parts = append(parts, r.cpu)
	}
	parts = append(parts, "GOMAXPROCS "+strconv.Itoa(r.procs))
	return "Measured on " + strings.Join(parts, ", ")
}

// writeTable writes a markdown table with the first row as header and
// columns padded, so the committed file reads well as plain text too.
func writeTable(b *strings.Builder, cells [][]string) {
	widths := make([]int, len(cells[0]))
	for _, r := range cells {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c), 3)
		}
	}
	line := func(r []string) {
		for i, c := range r {
			b.WriteString("| ")
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)))
			b.WriteString(" ")
		}
		b.WriteString("|\n")
	}
	line(cells[0])
	sep := make([]string, len(widths))
	for i, w := range widths {
		sep[i] = strings.Repeat("-", w)
	}
	line(sep)
	for _, r := range cells[1:] {
		line(r)
	}
}

// committedTable is a committed table's cells by figure name, then by
// column header.
type committedTable map[string]map[string]string

// parseTable reads the markdown table in block back into cells. Lines
// outside the table are ignored.
func parseTable(block string) (committedTable, error) {
	var header []string
	t := committedTable{}
	for l := range strings.Lines(block) {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "|") {
			continue
		}
		cells := splitRow(l)
		switch {
		case header == nil:
			header = cells
		case isSeparator(cells):
		default:
			byCol := map[string]string{}
			for i, c := range cells {
				if i < len(header) {
					byCol[header[i]] = c
				}
			}
			t[byCol[colFigure]] = byCol
		}
	}
	if header == nil {
		return nil, errors.New("no table")
	}
	if !slices.Contains(header, colFigure) {
		return nil, fmt.Errorf("table has no %s column", colFigure)
	}
	return t, nil
}

// splitRow returns the trimmed cells of a markdown table row.
func splitRow(l string) []string {
	l = strings.TrimPrefix(l, "|")
	l = strings.TrimSuffix(l, "|")
	cells := strings.Split(l, "|")
	for i, c := range cells {
		cells[i] = strings.TrimSpace(c)
	}
	return cells
}

// isSeparator reports whether cells are a header separator like |---|:-:|.
func isSeparator(cells []string) bool {
	for _, c := range cells {
		if c == "" || strings.Trim(c, "-:") != "" {
			return false
		}
	}
	return true
}

// cellNumber reads the number a cell starts with, e.g. 522.5 from
// "522.5 µs"; "not measured" and "—" have none.
func cellNumber(cell string) (float64, bool) {
	f := strings.Fields(cell)
	if len(f) == 0 {
		return 0, false
	}
	x, err := strconv.ParseFloat(f[0], 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, false
	}
	return x, true
}

// comparison is the outcome of holding new figures against committed
// ones.
type comparison struct {
	regressions []string
	notes       []string
	checked     int // figures measured on both sides
}

// compareRows holds rows against the committed table old. A figure
// regresses when its guarded number is worse than the committed one by
// more than tol (0.2 is 20%); a figure on one side only is a note.
func compareRows(rows []row, old committedTable, tol float64) comparison {
	var c comparison
	known := map[string]bool{}
	for _, w := range rows {
		f := w.fig
		known[f.name] = true
		cells, inOld := old[f.name]
		was, hadOld := cellNumber(cells[f.guardedColumn()])
		now, hasNew := w.guarded()
		switch {
		case !hasNew && !hadOld:
			continue
		case !hadOld:
			if inOld {
				c.notes = append(c.notes, fmt.Sprintf("%s: measured now, not measured in the committed table", f.name))
			} else {
				c.notes = append(c.notes, fmt.Sprintf("%s: measured now, not in the committed table", f.name))
			}
			continue
		case !hasNew:
			c.notes = append(c.notes, fmt.Sprintf("%s: in the committed table, not measured now", f.name))
			continue
		}
		c.checked++
		if !regressed(now, was, tol, f.better) {
			continue
		}
		what := "value"
		if f.hasRatio() {
			what = "ratio"
		}
		better := "lower"
		if f.better == higherIsBetter {
			better = "higher"
		}
		change := ""
		if was != 0 {
			change = fmt.Sprintf("%+.1f%%, ", (now-was)/was*100)
		}
		msg := fmt.Sprintf("%s: %s %s, committed %s (%s%s is better, tolerance %s%%)",
			f.name, what, w.guardedText(), cells[f.guardedColumn()], change, better,
			strconv.FormatFloat(tol*100, 'f', -1, 64))
		c.regressions = append(c.regressions, msg)
	}
	// Sorted, so the notes come out the same on every run.
	for _, name := range slices.Sorted(maps.Keys(old)) {
		if name != "" && !known[name] {
			c.notes = append(c.notes, fmt.Sprintf("%s: in the committed table, no longer a figure", name))
		}
	}
	return c
}

// regressed reports whether now is worse than was by more than tol.
func regressed(now, was, tol float64, better direction) bool {
	// The table's numbers are decimal; allow for the float product not
	// being exact so a change of exactly tol passes.
	const slack = 1e-9
	if better == higherIsBetter {
		limit := was * (1 - tol)
		return now < limit-slack*math.Abs(limit)
	}
	limit := was * (1 + tol)
	return now > limit+slack*math.Abs(limit)
}

// findMarkers returns where the part between the markers starts and
// ends in doc; found is false when doc has neither marker.
func findMarkers(doc string) (start, end int, found bool, err error) {
	b := strings.Index(doc, beginMarker)
	e := strings.Index(doc, endMarker)
	switch {
	case b < 0 && e < 0:
		return 0, 0, false, nil
	case b < 0:
		return 0, 0, false, fmt.Errorf("%s without %s", endMarker, beginMarker)
	case e < 0:
		return 0, 0, false, fmt.Errorf("%s without %s", beginMarker, endMarker)
	case e < b:
		return 0, 0, false, fmt.Errorf("%s before %s", endMarker, beginMarker)
	case strings.Count(doc, beginMarker) > 1 || strings.Count(doc, endMarker) > 1:
		return 0, 0, false, errors.New("more than one table between markers")
	}
	return b + len(beginMarker), e, true, nil
}

// extract returns the committed table section of doc.
func extract(doc string) (string, error) {
	start, end, found, err := findMarkers(doc)
	if err != nil {
		return "", err
	}
	if !found {
		return "", fmt.Errorf("no %s marker", beginMarker)
	}
	return doc[start:end], nil
}

// splice returns doc with the section between the markers replaced by
// block, or with markers and block appended when doc has none. Text
// outside the markers is kept byte for byte.
func splice(doc, block string) (string, error) {
	start, end, found, err := findMarkers(doc)
	if err != nil {
		return "", err
	}
	// Blank lines around the table keep markdown from reading the markers
	// as part of it.
	inner := "\n\n" + block + "\n"
	if found {
		return doc[:start] + inner + doc[end:], nil
	}
	if doc != "" {
		if !strings.HasSuffix(doc, "\n") {
			doc += "\n"
		}
		doc += "\n"
	}
	return doc + beginMarker + inner + endMarker + "\n", nil
}

// compareFile holds rows against the table committed in path.
func compareFile(path string, rows []row, tol float64) (comparison, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return comparison{}, fmt.Errorf("read committed table: %w", err)
	}
	block, err := extract(string(doc))
	if err != nil {
		return comparison{}, fmt.Errorf("%s: %w", path, err)
	}
	old, err := parseTable(block)
	if err != nil {
		return comparison{}, fmt.Errorf("%s: %w", path, err)
	}
	return compareRows(rows, old, tol), nil
}

// updateFile puts block between the markers of path, creating the
// markers or the file when missing.
func updateFile(path, block string) error {
	doc, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	out, err := splice(string(doc), block)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return writeAtomic(path, []byte(out))
}

// writeAtomic replaces path with data, keeping its mode (0644 for a new
// file), so a failed write never leaves a half-written file.
func writeAtomic(path string, data []byte) error {
	perm := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	if err := atomicfile.Write(path, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
