package host

import (
	"math"
	"testing"
	"time"
)

// A caller's timeout is held to run_timeout, the near miss included, and
// a run without one gets run_timeout and call_timeout.
func TestRunBounds(t *testing.T) {
	const run, call = 10 * time.Minute, 2 * time.Minute
	for _, c := range []struct {
		asked, timeout, perCall time.Duration
	}{
		{0, run, call},
		{-1, run, call},
		{time.Millisecond, time.Millisecond, 0},
		{run - 1, run - 1, 0},
		{run, run, 0},
		{run + 1, run, 0},
		{run + time.Millisecond, run, 0},
		{200 * 365 * 24 * time.Hour, run, 0},
		{math.MaxInt64, run, 0},
	} {
		timeout, perCall := runBounds(c.asked, run, call)
		if timeout != c.timeout || perCall != c.perCall {
			t.Errorf("runBounds(%d) = %v, %v; want %v, %v", c.asked, timeout, perCall, c.timeout, c.perCall)
		}
	}
	// Without a run_timeout a caller's deadline stands as asked.
	if timeout, perCall := runBounds(time.Hour, 0, call); timeout != time.Hour || perCall != 0 {
		t.Errorf("without run_timeout: %v, %v; want 1h, 0", timeout, perCall)
	}
}
