package figures

import (
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// Unit is how a chart reads its values.
type Unit int

// The units of a chart.
const (
	// PerSecond reads values as rates, "12/s".
	PerSecond Unit = iota
	// Seconds reads values as durations, "3.5 ms".
	Seconds
	// Count reads values as whole counts, "4".
	Count
)

// Format writes v in unit u, as the charts label it.
func (u Unit) Format(v float64) string {
	switch u {
	case Seconds:
		switch {
		case v == 0:
			return "0 s"
		case v < 1e-3:
			return number(v*1e6) + " µs"
		case v < 1:
			return number(v*1e3) + " ms"
		}
		return number(v) + " s"
	case Count:
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	}
	return number(v) + "/s"
}

// number writes v with three significant digits, without an exponent
// below a billion.
func number(v float64) string {
	if math.Abs(v) >= 100 && math.Abs(v) < 1e9 {
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// ChartSpec is what a chart draws.
type ChartSpec struct {
	// Label says what the chart shows, as "kv.get calls per second"; it
	// opens the chart's accessible name and title.
	Label string
	// Unit reads the values.
	Unit Unit
	// Points are drawn at their End, left to right in time. Points whose
	// intervals do not touch, and values that are not finite, break the
	// line.
	Points []Point
	// From and To span the time axis, as Figures.First and Figures.Last
	// to line several charts up; the points' span when either is zero.
	From, To time.Time
}

// The chart's geometry, in viewBox units: CSS scales the whole.
const (
	chartW      = 300
	chartH      = 80
	plotLeft    = 54
	plotRight   = chartW - 4
	plotTop     = 6
	plotBottom  = chartH - 16
	axisLabelY  = chartH - 4
	yLabelRight = plotLeft - 4
)

// chartTemplate draws a chart with presentation attributes and classes
// only: the console's Content-Security-Policy allows no inline style or
// script, and html/template escapes every text and attribute in it.
var chartTemplate = template.Must(template.New("chart").Parse(
	`<svg class="chart" viewBox="0 0 {{.W}} {{.H}}" width="100%" role="img" aria-label="{{.Summary}}">` +
		`<title>{{.Summary}}</title>` +
		`<line class="axis" x1="{{.Left}}" y1="{{.Bottom}}" x2="{{.Right}}" y2="{{.Bottom}}" stroke="currentColor" stroke-opacity="0.4"/>` +
		`<line class="axis" x1="{{.Left}}" y1="{{.Top}}" x2="{{.Left}}" y2="{{.Bottom}}" stroke="currentColor" stroke-opacity="0.4"/>` +
		`{{range .Areas}}<path class="area" d="{{.}}" fill="currentColor" fill-opacity="0.15"/>{{end}}` +
		`{{range .Lines}}<path class="line" d="{{.}}" fill="none" stroke="currentColor" stroke-width="1.5"/>{{end}}` +
		`{{range .Dots}}<circle class="dot" cx="{{.X}}" cy="{{.Y}}" r="1.5" fill="currentColor"/>{{end}}` +
		`{{if .Empty}}<text class="axis empty" x="{{.MidX}}" y="{{.MidY}}" text-anchor="middle" font-size="10" fill="currentColor">no data</text>{{end}}` +
		`<text class="axis" x="{{.YLabelX}}" y="{{.TopText}}" text-anchor="end" font-size="9" fill="currentColor">{{.YMax}}</text>` +
		`<text class="axis" x="{{.YLabelX}}" y="{{.Bottom}}" text-anchor="end" font-size="9" fill="currentColor">{{.YMin}}</text>` +
		`{{if .XMin}}<text class="axis" x="{{.Left}}" y="{{.XLabelY}}" text-anchor="start" font-size="9" fill="currentColor">{{.XMin}}</text>` +
		`<text class="axis" x="{{.Right}}" y="{{.XLabelY}}" text-anchor="end" font-size="9" fill="currentColor">{{.XMax}}</text>{{end}}` +
		`</svg>`))

type dot struct{ X, Y string }

type chartView struct {
	W, H, Left, Right, Top, Bottom, TopText, YLabelX, XLabelY, MidX, MidY int
	Summary, YMin, YMax, XMin, XMax                                       string
	Areas, Lines                                                          []string
	Dots                                                                  []dot
	Empty                                                                 bool
}

// Chart draws c as an inline SVG line chart scaled by CSS (width 100%).
// Its accessible name and <title> say what it shows with the last and the
// peak value; the axes are labelled with 0 and the peak, and with the
// first and last time. It uses no style attribute, script or external
// reference, only the classes chart, axis, area, line and dot.
func Chart(c ChartSpec) template.HTML {
	v := chartView{
		W: chartW, H: chartH, Left: plotLeft, Right: plotRight, Top: plotTop, Bottom: plotBottom,
		TopText: plotTop + 7, YLabelX: yLabelRight, XLabelY: axisLabelY,
		MidX: (plotLeft + plotRight) / 2, MidY: (plotTop + plotBottom) / 2,
	}
	var points []Point
	for _, p := range c.Points {
		if !math.IsNaN(p.Value) && !math.IsInf(p.Value, 0) {
			points = append(points, p)
		}
	}
	label := strings.TrimSpace(c.Label)
	from, to := c.From, c.To
	if (from.IsZero() || to.IsZero()) && len(points) > 0 {
		from, to = points[0].Start, points[0].End
		for _, p := range points {
			from, to = minTime(from, p.Start), maxTime(to, p.End)
		}
	}
	peak, last := 0.0, 0.0
	for _, p := range points {
		peak = max(peak, p.Value)
	}
	if len(points) > 0 {
		last = points[len(points)-1].Value
		v.Summary = label + ": last " + c.Unit.Format(last) + ", peak " + c.Unit.Format(peak)
	} else {
		v.Summary = label + ": no data"
		v.Empty = true
	}
	v.YMin, v.YMax = c.Unit.Format(0), c.Unit.Format(peak)
	if !from.IsZero() {
		v.XMin, v.XMax = from.Format(time.TimeOnly), to.Format(time.TimeOnly)
	}

	top := peak
	if top <= 0 {
		top = 1
	}
	span := to.Sub(from).Seconds()
	x := func(t time.Time) float64 {
		if span <= 0 {
			return plotRight
		}
		return plotLeft + (plotRight-plotLeft)*clamp(t.Sub(from).Seconds()/span)
	}
	y := func(val float64) float64 {
		return plotBottom - (plotBottom-plotTop)*clamp(val/top)
	}
	var run []Point
	flush := func() {
		switch len(run) {
		case 0:
			return
		case 1:
			v.Dots = append(v.Dots, dot{X: coord(x(run[0].End)), Y: coord(y(run[0].Value))})
		default:
			var line strings.Builder
			for i, p := range run {
				if i == 0 {
					line.WriteString("M")
				} else {
					line.WriteString(" L")
				}
				line.WriteString(coord(x(p.End)) + " " + coord(y(p.Value)))
			}
			base := coord(plotBottom)
			v.Lines = append(v.Lines, line.String())
			v.Areas = append(v.Areas, "M"+coord(x(run[0].End))+" "+base+" L"+
				strings.TrimPrefix(line.String(), "M")+" L"+coord(x(run[len(run)-1].End))+" "+base+" Z")
		}
		run = run[:0]
	}
	for i, p := range c.Points {
		broken := math.IsNaN(p.Value) || math.IsInf(p.Value, 0)
		if broken || (len(run) > 0 && !p.Start.Equal(c.Points[i-1].End)) {
			flush()
		}
		if !broken {
			run = append(run, p)
		}
	}
	flush()

	var out strings.Builder
	if err := chartTemplate.Execute(&out, v); err != nil {
		// The template and its data are fixed by this file; a failure
		// here is a bug, shown as an empty accessible chart.
		return template.HTML(`<svg class="chart" viewBox="0 0 300 80" width="100%" role="img" aria-label="chart failed"></svg>`)
	}
	return template.HTML(out.String())
}

func clamp(f float64) float64 { return min(max(f, 0), 1) }

func coord(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
