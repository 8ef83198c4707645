package direct

import (
	"fmt"
	"testing"
	"time"
)

// A run is remembered until its expiry, and forgotten after it, whatever
// else is remembered.
func TestEndedRunsForgetOnlyTheExpired(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	r := newEndedRuns()
	r.add("run_late", t0.Add(10*time.Second))
	r.add("run_early", t0.Add(time.Second))
	r.forget(t0.Add(time.Second))
	if !r.has("run_early") || !r.has("run_late") {
		t.Fatal("a run was forgotten at its expiry, not after it")
	}
	r.forget(t0.Add(time.Second + time.Nanosecond))
	if r.has("run_early") {
		t.Error("run_early is remembered past its expiry")
	}
	if !r.has("run_late") {
		t.Error("run_late was forgotten before its expiry")
	}
	r.forget(t0.Add(time.Hour))
	if r.len() != 0 || len(r.queue) != 0 {
		t.Errorf("%d runs and %d queued after every expiry passed", r.len(), len(r.queue))
	}
}

// A run ended twice keeps the later expiry: the earlier entry of the
// queue does not forget it, and a second end with an earlier expiry does
// not shorten it.
func TestARunEndedAgainKeepsItsLaterExpiry(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	r := newEndedRuns()
	r.add("run_1", t0.Add(time.Second))
	r.add("run_1", t0.Add(5*time.Second))
	r.forget(t0.Add(2 * time.Second))
	if !r.has("run_1") {
		t.Fatal("the run's first expiry forgot it, though it was ended again with a later one")
	}
	r.add("run_1", t0.Add(3*time.Second))
	r.forget(t0.Add(4 * time.Second))
	if !r.has("run_1") {
		t.Fatal("a later end with an earlier expiry shortened the run's")
	}
	r.forget(t0.Add(6 * time.Second))
	if r.has("run_1") || len(r.queue) != 0 {
		t.Errorf("remembered %v, %d queued after the later expiry", r.has("run_1"), len(r.queue))
	}
}

// BenchmarkEndRun ends one run on an endpoint that already remembers
// ended runs whose grants have not expired: the cost of the end does not
// grow with them.
func BenchmarkEndRun(b *testing.B) {
	for _, remembered := range []int{0, 10_000, 100_000} {
		b.Run(fmt.Sprintf("remembered=%d", remembered), func(b *testing.B) {
			e := NewEndpoint(echo, 1<<20)
			later := time.Now().Add(time.Hour)
			for i := range remembered {
				e.EndRun(fmt.Sprintf("run_old_%d", i), later)
			}
			ids := make([]string, b.N)
			for i := range ids {
				ids[i] = fmt.Sprintf("run_%d", i)
			}
			b.ResetTimer()
			for i := range b.N {
				e.EndRun(ids[i], later)
			}
		})
	}
}
