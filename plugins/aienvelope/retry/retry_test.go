package retry

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

type classErr struct {
	retryable bool
	after     time.Duration
}

func (e *classErr) Error() string             { return "class error" }
func (e *classErr) IsRetryable() bool         { return e.retryable }
func (e *classErr) RetryAfter() time.Duration { return e.after }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fixed(p Policy, r float64) Policy {
	p.Rand = func() float64 { return r }
	p.Now = func() time.Time { return t0 }
	return p
}

func TestDecide(t *testing.T) {
	base := Policy{MaxAttempts: 4, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 250 * time.Millisecond, MaxRetryAfter: 5 * time.Second}
	tests := []struct {
		name     string
		attempt  int
		err      error
		rand     float64
		deadline time.Time
		want     Decision
	}{
		{"plain error is never retried", 1, errors.New("x"), 0.5, time.Time{}, Decision{Reason: "not retryable"}},
		{"not retryable class", 1, &classErr{retryable: false}, 0.5, time.Time{}, Decision{Reason: "not retryable"}},
		{"first backoff is jittered under the initial cap", 1, &classErr{retryable: true}, 0.5, time.Time{}, Decision{true, 50 * time.Millisecond, "retryable"}},
		{"second backoff doubles the cap", 2, &classErr{retryable: true}, 0.5, time.Time{}, Decision{true, 100 * time.Millisecond, "retryable"}},
		{"third backoff is capped", 3, &classErr{retryable: true}, 0.999, time.Time{}, Decision{true, 249750 * time.Microsecond, "retryable"}},
		{"jitter may be zero", 1, &classErr{retryable: true}, 0, time.Time{}, Decision{true, 0, "retryable"}},
		{"attempts exhausted", 4, &classErr{retryable: true}, 0.5, time.Time{}, Decision{Reason: "attempts exhausted"}},
		{"retry-after honoured exactly", 1, &classErr{retryable: true, after: 2 * time.Second}, 0.5, time.Time{}, Decision{true, 2 * time.Second, "retryable"}},
		{"retry-after over the cap ends", 1, &classErr{retryable: true, after: 6 * time.Second}, 0.5, time.Time{}, Decision{Reason: "retry-after over the cap"}},
		{"retry-after past the deadline ends", 1, &classErr{retryable: true, after: 2 * time.Second}, 0.5, t0.Add(time.Second), Decision{Reason: "wait would pass the deadline"}},
		{"backoff within the deadline", 1, &classErr{retryable: true}, 0.5, t0.Add(time.Second), Decision{true, 50 * time.Millisecond, "retryable"}},
		{"backoff landing on the deadline ends", 1, &classErr{retryable: true}, 0.5, t0.Add(50 * time.Millisecond), Decision{Reason: "wait would pass the deadline"}},
		{"wrapped errors are classified", 1, errors.Join(errors.New("ctx"), &classErr{retryable: true}), 0.5, time.Time{}, Decision{true, 50 * time.Millisecond, "retryable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fixed(base, tt.rand).Decide(tt.attempt, tt.err, tt.deadline)
			if got != tt.want {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDoSleepsAsDecidedAndReturnsTheLastError(t *testing.T) {
	var slept []time.Duration
	p := fixed(Policy{MaxAttempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}, 1.0/2)
	p.Sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	errs := []error{&classErr{retryable: true, after: 300 * time.Millisecond}, &classErr{retryable: true}, &classErr{retryable: true}}
	calls := 0
	attempts, err := p.Do(context.Background(), func(context.Context) error { calls++; return errs[calls-1] })
	if attempts != 3 || calls != 3 || err != errs[2] {
		t.Fatalf("attempts %d calls %d err %v", attempts, calls, err)
	}
	if want := []time.Duration{300 * time.Millisecond, 100 * time.Millisecond}; len(slept) != 2 || slept[0] != want[0] || slept[1] != want[1] {
		t.Errorf("slept %v, want %v", slept, want)
	}
}

func TestDoStopsOnSuccessAndOnNonRetryable(t *testing.T) {
	p := fixed(Policy{MaxAttempts: 5}, 0)
	p.Sleep = func(context.Context, time.Duration) error { return nil }
	calls := 0
	n, err := p.Do(context.Background(), func(context.Context) error {
		calls++
		if calls < 2 {
			return &classErr{retryable: true}
		}
		return nil
	})
	if n != 2 || err != nil {
		t.Errorf("success after one retry: attempts %d err %v", n, err)
	}
	want := &classErr{retryable: false}
	n, err = p.Do(context.Background(), func(context.Context) error { return want })
	if n != 1 || err != want {
		t.Errorf("non-retryable: attempts %d err %v", n, err)
	}
}

func TestDoNeverSleepsPastTheDeadline(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), t0.Add(time.Second))
	defer cancel()
	p := fixed(Policy{MaxAttempts: 10, MaxRetryAfter: time.Hour}, 0)
	p.Sleep = func(context.Context, time.Duration) error { t.Fatal("slept past the deadline"); return nil }
	last := &classErr{retryable: true, after: 2 * time.Second}
	n, err := p.Do(ctx, func(context.Context) error { return last })
	if n != 1 || err != last {
		t.Errorf("attempts %d err %v, want 1 and the server's error", n, err)
	}
}

func TestDoReturnsWhenTheSleepIsCancelled(t *testing.T) {
	p := fixed(Policy{MaxAttempts: 3}, 0.5)
	p.Sleep = func(context.Context, time.Duration) error { return context.Canceled }
	last := &classErr{retryable: true}
	if n, err := p.Do(context.Background(), func(context.Context) error { return last }); n != 1 || err != last {
		t.Errorf("attempts %d err %v", n, err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		h    map[string]string
		want time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"milliseconds win", map[string]string{"Retry-After": "7", "Retry-After-Ms": "250"}, 250 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": "Sun, 29 Nov 2026 12:00:30 GMT"}, 30 * time.Second},
		{"date in the past", map[string]string{"Retry-After": "Sun, 29 Nov 2026 11:00:00 GMT"}, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"negative", map[string]string{"Retry-After": "-3"}, 0},
		{"bad ms falls back to seconds", map[string]string{"Retry-After-Ms": "x", "Retry-After": "2"}, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.h {
				h.Set(k, v)
			}
			if got := ParseRetryAfter(h, now); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
