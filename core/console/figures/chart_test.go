package figures

import (
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

func pointsAt(t0 time.Time, vs ...float64) []Point {
	var out []Point
	for i, v := range vs {
		out = append(out, Point{Start: t0.Add(time.Duration(i) * 10 * time.Second), End: t0.Add(time.Duration(i+1) * 10 * time.Second), Value: v})
	}
	return out
}

var t0 = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

func TestChartSaysWhatItShows(t *testing.T) {
	svg := string(Chart(ChartSpec{Label: "kv.get calls per second", Unit: PerSecond, Points: pointsAt(t0, 1, 12, 3)}))
	for _, want := range []string{
		`<svg class="chart" viewBox="0 0 300 80" width="100%" role="img" aria-label="kv.get calls per second: last 3/s, peak 12/s">`,
		`<title>kv.get calls per second: last 3/s, peak 12/s</title>`,
		`>12/s</text>`, `>0/s</text>`, `>03:04:00</text>`, `>03:04:30</text>`,
		`class="line"`, `class="area"`, `class="axis"`,
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %s:\n%s", want, svg)
		}
	}
	if n := strings.Count(svg, `class="line"`); n != 1 {
		t.Errorf("%d lines for touching points, want 1", n)
	}
	// The peak is at the top of the plot, 0 at its bottom.
	if !strings.Contains(svg, `d="M134.7 59.2 L215.3 6.0 L296.0 49.5"`) {
		t.Errorf("line not where the values put it:\n%s", svg)
	}
}

func TestChartBreaksTheLineAtGaps(t *testing.T) {
	ps := pointsAt(t0, 1, 2, 3, 4, 5, 6, 7)
	// No point for the third interval; a non-finite sixth value; the
	// seventh alone.
	ps = append(ps[:2:2], append(ps[3:5:5], Point{Start: ps[5].Start, End: ps[5].End, Value: math.NaN()}, ps[6])...)
	svg := string(Chart(ChartSpec{Label: "p99", Unit: Seconds, Points: ps}))
	if n := strings.Count(svg, `class="line"`); n != 2 {
		t.Errorf("%d lines, want 2 (the gaps break it):\n%s", n, svg)
	}
	if n := strings.Count(svg, `class="area"`); n != 2 {
		t.Errorf("%d areas, want 2", n)
	}
	if n := strings.Count(svg, `class="dot"`); n != 1 {
		t.Errorf("%d dots, want 1 for the point alone", n)
	}
	if strings.Contains(svg, "NaN") {
		t.Errorf("NaN drawn:\n%s", svg)
	}
	if !strings.Contains(svg, `aria-label="p99: last 7 s, peak 7 s"`) {
		t.Errorf("summary:\n%s", svg)
	}
}

func TestChartEscapesText(t *testing.T) {
	label := `<script>alert("x")</script> & <a href="javascript:x">`
	svg := string(Chart(ChartSpec{Label: label, Points: pointsAt(t0, 1)}))
	for _, bad := range []string{"<script", "<a ", `"x")`, "& <"} {
		if strings.Contains(svg, bad) {
			t.Errorf("chart holds %q unescaped:\n%s", bad, svg)
		}
	}
	if !strings.Contains(svg, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &lt;a href=&#34;javascript:x&#34;&gt;") {
		t.Errorf("label not escaped as text:\n%s", svg)
	}
}

func TestChartsHaveNoStyleScriptOrReference(t *testing.T) {
	specs := []ChartSpec{
		{Label: "empty"},
		{Label: "one", Unit: Count, Points: pointsAt(t0, 4)},
		{Label: "flat", Points: pointsAt(t0, 0, 0, 0)},
		{Label: "latency", Unit: Seconds, Points: pointsAt(t0, 0.0002, 0.04, 3), From: t0.Add(-time.Hour), To: t0.Add(time.Hour)},
		{Label: `style="x" onload="y"`, Points: pointsAt(t0, math.Inf(1), 2)},
	}
	for _, c := range specs {
		svg := string(Chart(c))
		if !strings.HasPrefix(svg, "<svg ") || !strings.Contains(svg, `role="img"`) || !strings.Contains(svg, "<title>") {
			t.Errorf("%s: not a titled image:\n%s", c.Label, svg)
		}
		if strings.Contains(svg, " style=") {
			t.Errorf("%s: a style attribute:\n%s", c.Label, svg)
		}
		// Read as XML, every element and attribute is one a chart may use.
		dec := xml.NewDecoder(strings.NewReader(svg))
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: not well-formed: %v\n%s", c.Label, err, svg)
			}
			el, ok := tok.(xml.StartElement)
			if !ok {
				continue
			}
			switch el.Name.Local {
			case "svg", "title", "line", "path", "circle", "text":
			default:
				t.Errorf("%s: element %s", c.Label, el.Name.Local)
			}
			for _, a := range el.Attr {
				name := strings.ToLower(a.Name.Local)
				if name == "style" || strings.HasPrefix(name, "on") || strings.Contains(name, "href") || strings.Contains(a.Value, "url(") {
					t.Errorf("%s: attribute %s=%q", c.Label, a.Name.Local, a.Value)
				}
			}
		}
	}
}

func TestChartEmpty(t *testing.T) {
	svg := string(Chart(ChartSpec{Label: "runs", Points: []Point{{Start: t0, End: t0.Add(time.Second), Value: math.NaN()}}}))
	if !strings.Contains(svg, `aria-label="runs: no data"`) || !strings.Contains(svg, ">no data</text>") || strings.Contains(svg, `class="line"`) {
		t.Errorf("empty chart:\n%s", svg)
	}
}

func TestUnitFormat(t *testing.T) {
	for _, c := range []struct {
		u    Unit
		v    float64
		want string
	}{
		{PerSecond, 0.125, "0.125/s"}, {PerSecond, 1234.4, "1234/s"}, {PerSecond, 12.34, "12.3/s"},
		{Seconds, 0.00035, "350 µs"}, {Seconds, 0.0125, "12.5 ms"}, {Seconds, 2.5, "2.5 s"}, {Seconds, 0, "0 s"},
		{Count, 3.0000001, "3"},
	} {
		if got := c.u.Format(c.v); got != c.want {
			t.Errorf("%d.Format(%v) = %q, want %q", c.u, c.v, got, c.want)
		}
	}
}
