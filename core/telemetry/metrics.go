// Package telemetry holds the host's Prometheus metrics.
package telemetry

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/wop"
)

// Metrics is the host's metric set. It outlives a reload: the host that
// is current reports into the same series.
type Metrics struct {
	reg *prometheus.Registry

	calls         *prometheus.CounterVec
	callLatency   *prometheus.HistogramVec
	callsInFlight *prometheus.GaugeVec
	// directCalls counts the calls among calls that were made on direct
	// channels.
	directCalls *prometheus.CounterVec
	runs        *prometheus.CounterVec
	runLatency  *prometheus.HistogramVec

	stateWritable      prometheus.Gauge
	stateWriteFailures *prometheus.CounterVec
	replays            *prometheus.CounterVec
	pruned             *prometheus.CounterVec

	sandboxViolations *prometheus.CounterVec
}

// NewMetrics returns the metric set. records is read at every scrape for
// the per-capability series (state, restarts); it may return nil.
func NewMetrics(records func() []registry.Record) *Metrics {
	// From a local call (~0.3 ms) to a slow model (a minute).
	latencyBuckets := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wophost_ctx_calls_total",
			Help: "Host-service calls from packs and plugins, by family, method and result code (\"ok\" on success).",
		}, []string{"family", "method", "code"}),
		callLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wophost_ctx_call_duration_seconds",
			Help:    "Latency of host-service calls, by family and method (a direct-channel call as the plugin timed it).",
			Buckets: latencyBuckets,
		}, []string{"family", "method"}),
		directCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wophost_ctx_direct_calls_total",
			Help: "Of wophost_ctx_calls_total, the calls nodes made on direct channels, reported by the plugins when each run ended.",
		}, []string{"family", "method", "code"}),
		callsInFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wophost_ctx_calls_in_flight",
			Help: "Host-service calls in flight, by family.",
		}, []string{"family"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wophost_node_runs_total",
			Help: "Node executions, by type id and result code (\"ok\" on success).",
		}, []string{"type_id", "code"}),
		runLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wophost_node_run_duration_seconds",
			Help:    "Duration of node executions, by type id.",
			Buckets: latencyBuckets,
		}, []string{"type_id"}),
		stateWritable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "wophost_state_writable",
			Help: "1 while the state directory takes writes, 0 while runs are refused because it does not.",
		}),
		stateWriteFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wophost_state_write_failures_total",
			Help: "Writes under the state directory that failed, by store (run_records, idempotency_keys).",
		}, []string{"store"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wophost_idempotent_replays_total",
			Help: "Node executions answered with the recorded outcome of their idempotency key, by type id.",
		}, []string{"type_id"}),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wophost_pruned_records_total",
			Help: "Records removed by retention, by store (run_records, idempotency_keys).",
		}, []string{"store"}),
		sandboxViolations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wophost_sandbox_violations_total",
			Help: "Nodes failed by a pack's sandbox, by pack and rule (memory, capability, timeout, escape).",
		}, []string{"pack", "rule"}),
	}
	// Writable until a host says otherwise; the stores' series exist from
	// the start, so a rate over them needs no first failure.
	m.stateWritable.Set(1)
	for _, store := range []string{"run_records", "idempotency_keys"} {
		m.stateWriteFailures.WithLabelValues(store)
		m.pruned.WithLabelValues(store)
	}
	m.reg.MustRegister(m.stateWritable, m.stateWriteFailures, m.replays, m.pruned, m.sandboxViolations)
	m.reg.MustRegister(m.calls, m.directCalls, m.callLatency, m.callsInFlight, m.runs, m.runLatency,
		newCapabilityCollector(records),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Gatherer reads the same series Handler serves, for in-process readers
// such as the console's figures.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// CallStarted records the start of one host-service call; the returned
// func records its end with the call's error (nil on success).
func (m *Metrics) CallStarted(family, method string) func(err error) {
	inFlight := m.callsInFlight.WithLabelValues(family)
	inFlight.Inc()
	start := time.Now()
	return func(err error) {
		inFlight.Dec()
		m.callLatency.WithLabelValues(family, method).Observe(time.Since(start).Seconds())
		m.calls.WithLabelValues(family, method, codeLabel(err)).Inc()
	}
}

// CallReported records a call made on a direct channel, which the plugin
// reported when its run ended: counted and timed like a routed call.
func (m *Metrics) CallReported(family, method string, took time.Duration, err error) {
	// The family's in-flight series exists, at 0, as for a routed call.
	m.callsInFlight.WithLabelValues(family)
	m.callLatency.WithLabelValues(family, method).Observe(took.Seconds())
	m.calls.WithLabelValues(family, method, codeLabel(err)).Inc()
	m.directCalls.WithLabelValues(family, method, codeLabel(err)).Inc()
}

// RunFinished records one node execution.
func (m *Metrics) RunFinished(typeID string, d time.Duration, err error) {
	m.runLatency.WithLabelValues(typeID).Observe(d.Seconds())
	m.runs.WithLabelValues(typeID, codeLabel(err)).Inc()
}

// StateWritable records whether the state directory takes writes
// (host.StateObserver).
func (m *Metrics) StateWritable(writable bool) {
	if writable {
		m.stateWritable.Set(1)
	} else {
		m.stateWritable.Set(0)
	}
}

// StateWriteFailed counts a failed write to store (host.StateObserver).
func (m *Metrics) StateWriteFailed(store string) { m.stateWriteFailures.WithLabelValues(store).Inc() }

// IdempotentReplay counts an execution answered from its idempotency
// key's record (host.StateObserver).
func (m *Metrics) IdempotentReplay(typeID string) { m.replays.WithLabelValues(typeID).Inc() }

// Pruned counts records of store removed by retention
// (host.StateObserver).
func (m *Metrics) Pruned(store string, n int) { m.pruned.WithLabelValues(store).Add(float64(n)) }

// SandboxRule is the rule of a pack's sandbox a violation broke, the rule
// label of wophost_sandbox_violations_total.
type SandboxRule string

// The rules, one for each sandbox failure code.
const (
	// SandboxMemory: the pack went past its memory limit
	// (sandbox_memory_exceeded).
	SandboxMemory SandboxRule = "memory"
	// SandboxCapability: the sandbox refused an operation the pack's
	// grant does not cover (sandbox_capability_denied).
	SandboxCapability SandboxRule = "capability"
	// SandboxTimeout: the pack went past its wall-clock bound
	// (sandbox_timeout).
	SandboxTimeout SandboxRule = "timeout"
	// SandboxEscape: the pack attempted what no grant allows
	// (sandbox_escape_attempt).
	SandboxEscape SandboxRule = "escape"
)

// SandboxRuleOf is the rule a node failure's code reports broken, and
// false for a code that is no sandbox failure.
func SandboxRuleOf(code string) (SandboxRule, bool) {
	switch code {
	case wop.CodeSandboxMemoryExceeded:
		return SandboxMemory, true
	case wop.CodeSandboxCapabilityDenied:
		return SandboxCapability, true
	case wop.CodeSandboxTimeout:
		return SandboxTimeout, true
	case wop.CodeSandboxEscapeAttempt:
		return SandboxEscape, true
	}
	return "", false
}

// SandboxViolation counts one violation of rule by pack's sandbox. The
// first violation of a pack makes its series for every rule, so that a
// rate over any of them needs no violation of that rule first.
func (m *Metrics) SandboxViolation(pack string, rule SandboxRule) {
	for _, r := range []SandboxRule{SandboxMemory, SandboxCapability, SandboxTimeout, SandboxEscape} {
		m.sandboxViolations.WithLabelValues(pack, string(r))
	}
	m.sandboxViolations.WithLabelValues(pack, string(rule)).Inc()
}

func codeLabel(err error) string {
	if err == nil {
		return "ok"
	}
	return wop.CodeOf(err)
}

// capabilityCollector reports each capability's restarts and state from
// the registry at scrape time, so the numbers cannot drift from it.
type capabilityCollector struct {
	records  func() []registry.Record
	restarts *prometheus.Desc
	state    *prometheus.Desc
}

func newCapabilityCollector(records func() []registry.Record) *capabilityCollector {
	return &capabilityCollector{
		records: records,
		restarts: prometheus.NewDesc("wophost_plugin_restarts_total",
			"Restarts of a capability's plugin after it crashed.", []string{"capability"}, nil),
		state: prometheus.NewDesc("wophost_plugin_state",
			"1 for the state a capability's plugin is in.", []string{"capability", "state"}, nil),
	}
}

func (c *capabilityCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.restarts
	ch <- c.state
}

func (c *capabilityCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.records() {
		ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(r.Restarts), r.Name)
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, 1, r.Name, string(r.State))
	}
}
