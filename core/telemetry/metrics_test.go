package telemetry

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/wop"
)

// The host reports its state directory to the metrics it observes calls
// with: Metrics must be a StateObserver, or those reports go nowhere.
var _ host.StateObserver = (*Metrics)(nil)

func TestStateMetrics(t *testing.T) {
	m := NewMetrics(func() []registry.Record { return nil })
	m.StateWritable(false)
	m.StateWriteFailed("run_records")
	m.StateWriteFailed("run_records")
	m.IdempotentReplay("kvdemo.remember")
	m.Pruned("idempotency_keys", 7)
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(w.Body)
	for _, want := range []string{
		"wophost_state_writable 0",
		`wophost_state_write_failures_total{store="run_records"} 2`,
		`wophost_state_write_failures_total{store="idempotency_keys"} 0`,
		`wophost_idempotent_replays_total{type_id="kvdemo.remember"} 1`,
		`wophost_pruned_records_total{store="idempotency_keys"} 7`,
		`wophost_pruned_records_total{store="run_records"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	m.StateWritable(true)
	w = httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(w.Body.String(), "wophost_state_writable 1") {
		t.Error("the gauge did not come back to 1")
	}
}

func TestSandboxViolations(t *testing.T) {
	m := NewMetrics(func() []registry.Record { return nil })
	scrape := func() string {
		w := httptest.NewRecorder()
		m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		return w.Body.String()
	}
	if strings.Contains(scrape(), "wophost_sandbox_violations_total{") {
		t.Fatal("a series before any violation")
	}
	for _, code := range []string{wop.CodeSandboxCapabilityDenied, wop.CodeSandboxCapabilityDenied, wop.CodeSandboxMemoryExceeded} {
		rule, ok := SandboxRuleOf(code)
		if !ok {
			t.Fatalf("%s: no rule", code)
		}
		m.SandboxViolation("kvdemo", rule)
	}
	m.SandboxViolation("other", SandboxEscape)
	body := scrape()
	for _, want := range []string{
		`wophost_sandbox_violations_total{pack="kvdemo",rule="capability"} 2`,
		`wophost_sandbox_violations_total{pack="kvdemo",rule="memory"} 1`,
		`wophost_sandbox_violations_total{pack="kvdemo",rule="timeout"} 0`,
		`wophost_sandbox_violations_total{pack="kvdemo",rule="escape"} 0`,
		`wophost_sandbox_violations_total{pack="other",rule="escape"} 1`,
		`wophost_sandbox_violations_total{pack="other",rule="capability"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	for code, want := range map[string]SandboxRule{
		wop.CodeSandboxTimeout: SandboxTimeout, wop.CodeSandboxEscapeAttempt: SandboxEscape,
		wop.CodeDeadlineExceeded: "", wop.CodePackRuntimeRequirementUnmet: "", "sandbox_memory": "",
	} {
		if got, ok := SandboxRuleOf(code); got != want || ok != (want != "") {
			t.Errorf("SandboxRuleOf(%s) = %q, %v; want %q", code, got, ok, want)
		}
	}
}

func TestGathererReadsTheServedSeries(t *testing.T) {
	m := NewMetrics(func() []registry.Record {
		return []registry.Record{{Name: "kvdemo.remember", Restarts: 3}}
	})
	m.WatchPacks(func() []PackRecord { return []PackRecord{{Name: "kvdemo", State: "ready", Restarts: 2}} })
	m.CallStarted("kv", "get")(nil)
	m.CallStarted("kv", "get")(wop.Errorf(wop.CodeNotFound, "no key"))
	m.RunFinished("kvdemo.remember", time.Millisecond, nil)
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range mt.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case mt.GetCounter() != nil:
				got[key] = mt.GetCounter().GetValue()
			case mt.GetHistogram() != nil:
				got[key] = float64(mt.GetHistogram().GetSampleCount())
			}
		}
	}
	for key, want := range map[string]float64{
		"wophost_ctx_calls_total,code=ok,family=kv,method=get":                       1,
		"wophost_ctx_calls_total,code=" + wop.CodeNotFound + ",family=kv,method=get": 1,
		"wophost_ctx_call_duration_seconds,family=kv,method=get":                     2,
		"wophost_node_runs_total,code=ok,type_id=kvdemo.remember":                    1,
		"wophost_node_run_duration_seconds,type_id=kvdemo.remember":                  1,
		"wophost_plugin_restarts_total,capability=kvdemo.remember":                   3,
		"wophost_pack_restarts_total,pack=kvdemo":                                    2,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
}
