// Package retry is the aiEnvelope plugin's one retry policy: only errors
// that say they are retryable are retried, a server's retry-after is
// honoured up to a cap, otherwise the wait is capped exponential backoff
// with full jitter, and no wait ever runs past the caller's deadline.
//
// Every decision goes through Policy.Decide, which depends only on its
// inputs and the injected random source, so tests pin each decision
// without sleeping.
package retry

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Retryable is what an error reports to the policy. Errors that do not
// implement it are never retried.
type Retryable interface {
	error
	// IsRetryable reports whether the same request may succeed later.
	IsRetryable() bool
	// RetryAfter is the wait the server asked for, or 0 when it did not.
	RetryAfter() time.Duration
}

// Policy says how often and how long to retry. The zero value of a field
// means its default (the Default* constants).
type Policy struct {
	// MaxAttempts counts the first try: 1 never retries.
	MaxAttempts int
	// InitialBackoff is the cap of the first backoff; each later attempt
	// doubles it, up to MaxBackoff.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// MaxRetryAfter is the longest server-requested wait the policy
	// accepts; a longer retry-after ends the retries with the error, so
	// the caller sees the server's hint instead of a silent long stall.
	MaxRetryAfter time.Duration
	// Rand returns a number in [0,1) for the jitter. Nil uses a source
	// seeded from the clock.
	Rand func() float64
	// Now and Sleep are the clock; nil uses the real one. Sleep must
	// return early with ctx.Err() when ctx ends.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Defaults used for zero fields of a Policy.
const (
	DefaultMaxAttempts    = 3
	DefaultInitialBackoff = 500 * time.Millisecond
	DefaultMaxBackoff     = 20 * time.Second
	DefaultMaxRetryAfter  = 60 * time.Second
)

// Decision is the policy's answer after a failed attempt.
type Decision struct {
	// Retry is false when the error must be returned as it is.
	Retry bool
	// Wait is how long to wait before the next attempt.
	Wait time.Duration
	// Reason says why, for logs and tests.
	Reason string
}

func (p Policy) withDefaults() Policy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = DefaultInitialBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = DefaultMaxBackoff
	}
	if p.MaxBackoff < p.InitialBackoff {
		p.MaxBackoff = p.InitialBackoff
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Sleep == nil {
		p.Sleep = sleep
	}
	if p.Rand == nil {
		p.Rand = clockRand()
	}
	return p
}

// Decide says whether to retry after attempt (1-based) failed with err,
// given the caller's deadline (zero for none).
func (p Policy) Decide(attempt int, err error, deadline time.Time) Decision {
	p = p.withDefaults()
	var r Retryable
	if !errors.As(err, &r) || !r.IsRetryable() {
		return Decision{Reason: "not retryable"}
	}
	if attempt >= p.MaxAttempts {
		return Decision{Reason: "attempts exhausted"}
	}
	var wait time.Duration
	if ra := r.RetryAfter(); ra > 0 {
		if ra > p.MaxRetryAfter {
			return Decision{Reason: "retry-after over the cap"}
		}
		wait = ra
	} else {
		// Full jitter: uniform in [0, min(max, initial·2^(attempt-1))).
		ceiling := float64(p.InitialBackoff) * math.Pow(2, float64(attempt-1))
		ceiling = math.Min(ceiling, float64(p.MaxBackoff))
		wait = time.Duration(p.Rand() * ceiling)
	}
	if !deadline.IsZero() && !p.Now().Add(wait).Before(deadline) {
		return Decision{Reason: "wait would pass the deadline"}
	}
	return Decision{Retry: true, Wait: wait, Reason: "retryable"}
}

// Do runs op until it succeeds or the policy says stop, and returns op's
// last error. The caller's deadline is ctx's. attempts reports how many
// times op ran.
func (p Policy) Do(ctx context.Context, op func(ctx context.Context) error) (attempts int, err error) {
	p = p.withDefaults()
	deadline, _ := ctx.Deadline()
	for attempt := 1; ; attempt++ {
		err = op(ctx)
		if err == nil {
			return attempt, nil
		}
		if ctx.Err() != nil {
			return attempt, err
		}
		d := p.Decide(attempt, err, deadline)
		if !d.Retry {
			return attempt, err
		}
		if serr := p.Sleep(ctx, d.Wait); serr != nil {
			return attempt, err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// clockRand is a small xorshift source seeded from the clock: jitter needs
// spread, not cryptographic quality, and no shared global state.
func clockRand() func() float64 {
	s := uint64(time.Now().UnixNano()) | 1
	return func() float64 {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		return float64(s>>11) / float64(1<<53)
	}
}

// ParseRetryAfter reads a server's requested wait from the headers:
// retry-after-ms (milliseconds), then retry-after (seconds, or an HTTP
// date measured against now). It returns 0 when there is none or it is
// malformed or in the past.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && !math.IsInf(ms, 0) {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 || math.IsInf(s, 0) || s > 1e6 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
