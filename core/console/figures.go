package console

import (
	"html/template"
	"net/http"
	"time"

	"github.com/wophost/wophost/core/console/figures"
)

// figuresData is the figures page: the window's figures and their charts.
type figuresData struct {
	// Sampling is false when the console has no sampler.
	Sampling bool
	Figures  figures.Figures
	// Over is the span the figures cover.
	Over         time.Duration
	Runs         seriesView
	Families     []seriesView
	Capabilities []seriesView
	Restarts     []countView
	Refusals     []countView
}

// seriesView is one series with its charts.
type seriesView struct {
	figures.Series
	RateChart, P50Chart, P99Chart template.HTML
}

// countView is a count of restarts or refusals with its chart.
type countView struct {
	Name, Kind string
	Count      uint64
	Chart      template.HTML
}

func (c *Console) figures(w http.ResponseWriter, _ *http.Request) {
	d := figuresData{Sampling: c.opts.Figures != nil}
	if d.Sampling {
		f := c.opts.Figures.Figures()
		d.Figures, d.Over = f, f.Last.Sub(f.First)
		chart := func(label string, unit figures.Unit, points []figures.Point) template.HTML {
			return figures.Chart(figures.ChartSpec{Label: label, Unit: unit, Points: points, From: f.First, To: f.Last})
		}
		series := func(name string, s figures.Series) seriesView {
			return seriesView{Series: s, RateChart: chart(name+" calls per second", figures.PerSecond, s.Rate),
				P50Chart: chart(name+" p50 latency", figures.Seconds, s.P50s), P99Chart: chart(name+" p99 latency", figures.Seconds, s.P99s)}
		}
		d.Runs = series("node runs", f.Runs)
		for _, s := range f.Families {
			d.Families = append(d.Families, series(s.Name, s))
		}
		for _, s := range f.Capabilities {
			d.Capabilities = append(d.Capabilities, series(s.Name, s))
		}
		for _, r := range f.Restarts {
			d.Restarts = append(d.Restarts, countView{Name: r.Name, Kind: r.Kind, Count: r.Count,
				Chart: chart(r.Kind+" "+r.Name+" restarts", figures.Count, r.Points)})
		}
		for _, r := range f.Refusals {
			d.Refusals = append(d.Refusals, countView{Name: r.Code, Kind: r.Kind, Count: r.Count,
				Chart: chart(r.Kind+"s ending "+r.Code, figures.Count, r.Points)})
		}
	}
	c.render(w, http.StatusOK, "figures.html", d)
}
