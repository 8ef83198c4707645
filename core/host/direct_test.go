package host

import (
	"testing"
	"time"
)

// Ending a run holds its answer until the run's deadline at the most,
// and a short grace past a deadline that has passed.
func TestEndRunWait(t *testing.T) {
	now := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		deadline time.Time
		want     time.Duration
	}{
		{now.Add(10 * time.Minute), endRunTimeout},
		{now.Add(endRunTimeout), endRunTimeout},
		{now.Add(time.Second), time.Second},
		{now.Add(endRunGrace), endRunGrace},
		{now.Add(time.Millisecond), endRunGrace},
		{now, endRunGrace},
		{now.Add(-time.Hour), endRunGrace},
	} {
		if got := endRunWait(tc.deadline, now); got != tc.want {
			t.Errorf("deadline in %s: wait %s, want %s", tc.deadline.Sub(now), got, tc.want)
		}
	}
}
