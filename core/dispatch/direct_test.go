package dispatch

import (
	"testing"
	"time"
)

// reported is a call of the run on a direct channel, as its plugin
// reports it when the run ends.
func reported(method string, at time.Time) Invocation {
	return Invocation{
		Caller: "pack demo node kv.remember", Depth: 1, Family: "acme.kv", Method: method,
		Key: InvocationKey("acme.kv", method, []byte(`{}`)), Result: []byte(`{}`), Direct: true, StartedAt: at,
	}
}

// Calls the plugin dropped on a direct channel cut the run's log where
// the first was lost: the routed and direct calls from the cut on go
// with them, so that a replay never answers past the gap.
func TestDroppedDirectCallsCutTheLog(t *testing.T) {
	inv := &countingInvoker{}
	inv.answer = echoAnswers(inv)
	r, j := journalRouter(inv)
	// track logs two routed calls of a run, apart in time, and returns
	// their start times.
	track := func(runID string) (*RunLog, time.Time, time.Time) {
		l, stop := j.Track(runID, LogLimits{}, nil)
		t.Cleanup(stop)
		for _, n := range []string{"1", "2"} {
			if _, err := callRun(t, r, runID, "acme.kv", "put", `{"n":`+n+`}`); err != nil {
				t.Fatal(err)
			}
			// Distinct start times on a coarse clock.
			time.Sleep(2 * time.Millisecond)
		}
		calls := l.Log().Calls
		if len(calls) != 2 || !calls[0].StartedAt.Before(calls[1].StartedAt) {
			t.Fatalf("routed calls %+v, want two in order", calls)
		}
		return l, calls[0].StartedAt, calls[1].StartedAt
	}

	t.Run("dropped", func(t *testing.T) {
		l, first, second := track("run_dropped")
		gap := second.Sub(first)
		// One direct call before the cut, one after the second routed
		// call; the plugin lost one from the cut on.
		l.AddDirect([]Invocation{reported("get", first.Add(gap/4)), reported("get", second.Add(gap))}, 1, first.Add(gap/2), "lost")
		log := l.Log()
		if len(log.Calls) != 2 || !log.Truncated || log.Dropped != 3 {
			t.Fatalf("%d calls kept, truncated %v, %d dropped; want the 2 before the cut, and the lost one, the routed and the direct call after it dropped",
				len(log.Calls), log.Truncated, log.Dropped)
		}
		if log.CutReason != "lost" {
			t.Errorf("cut reason %q, want the channel's", log.CutReason)
		}
		if c := log.Calls[0]; c.Seq != 1 || c.Direct || c.Method != "put" {
			t.Errorf("first call %+v, want the first routed one", c)
		}
		if c := log.Calls[1]; c.Seq != 2 || !c.Direct || !c.Pure || !c.StartedAt.Equal(first.Add(gap/4)) {
			t.Errorf("second call %+v, want the direct get before the cut, pure", c)
		}
	})

	t.Run("none dropped", func(t *testing.T) {
		l, first, second := track("run_whole")
		gap := second.Sub(first)
		l.AddDirect([]Invocation{reported("get", first.Add(gap/4)), reported("get", second.Add(gap))}, 0, time.Time{}, "")
		log := l.Log()
		if len(log.Calls) != 4 || log.Truncated || log.Dropped != 0 {
			t.Fatalf("%d calls kept, truncated %v, %d dropped; want all 4", len(log.Calls), log.Truncated, log.Dropped)
		}
		for i, want := range []bool{false, true, false, true} {
			if c := log.Calls[i]; c.Seq != i+1 || c.Direct != want {
				t.Errorf("call %d: seq %d, direct %v; want the calls in start order", i, c.Seq, c.Direct)
			}
		}
	})
}
