package telemetry

import "github.com/prometheus/client_golang/prometheus"

// PackRecord is what the metrics show of one pack.
type PackRecord struct {
	Name     string
	State    string
	Restarts int
}

// WatchPacks adds the per-pack series (state, restarts), read from packs
// at every scrape; packs may return nil.
func (m *Metrics) WatchPacks(packs func() []PackRecord) {
	m.reg.MustRegister(&packCollector{
		packs: packs,
		restarts: prometheus.NewDesc("wophost_pack_restarts_total",
			"Restarts of a pack's process after it crashed.", []string{"pack"}, nil),
		state: prometheus.NewDesc("wophost_pack_state",
			"1 for the state a pack is in.", []string{"pack", "state"}, nil),
	})
}

// packCollector reports each pack from the current host at scrape time,
// so the numbers cannot drift from what `host packs` shows.
type packCollector struct {
	packs    func() []PackRecord
	restarts *prometheus.Desc
	state    *prometheus.Desc
}

func (c *packCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.restarts
	ch <- c.state
}

func (c *packCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.packs() {
		ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(p.Restarts), p.Name)
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, 1, p.Name, p.State)
	}
}
