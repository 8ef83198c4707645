// Package logdedup collapses repeated identical log lines. During an
// outage (the database gone, a plugin failing every call) the same
// warning or error comes once per request, tens of thousands of lines in
// seconds, which bury everything else and fill disks. A Logger writes the
// first of a run of identical lines at once, counts the others within a
// window, and at the window's end writes one more line, the same with
// "repeated" set to how many it held back.
package logdedup

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Defaults of New.
const (
	// Window is how long identical lines are counted before the count is
	// written.
	Window = 10 * time.Second
	// maxKeys bounds the distinct lines counted at once; past it a line
	// is written as it comes, so that memory stays bounded whatever the
	// lines.
	maxKeys = 1024
)

// volatile reports whether key's values differ from one line to the
// next of the same event (which run, which attempt, how long): lines that
// differ only there are taken for the same line.
func volatile(key string) bool {
	switch key {
	case "run_id", "node_id", "request_id", "trace_id", "span_id",
		"attempt", "took", "elapsed", "duration", "timestamp", "@timestamp":
		return true
	}
	return false
}

// counts is the state the loggers derived from one New share.
type counts struct {
	window time.Duration
	// after schedules f after d, as time.AfterFunc does; a test replaces
	// it to end a window when it chooses.
	after func(d time.Duration, f func())
	mu    sync.Mutex
	held  map[string]*run
}

// run is one line seen within its window, and how many more came.
type run struct {
	repeated int
}

// Logger is an hclog.Logger that collapses identical lines at warn level
// and above. Lines at lower levels pass through: they are off in
// production, and a debug session wants every one.
type Logger struct {
	hclog.Logger
	c *counts
}

var _ hclog.Logger = (*Logger)(nil)

// New wraps l: identical lines at warn and above within window are
// written once, then once more with their count at the window's end.
func New(l hclog.Logger, window time.Duration) *Logger {
	return newWith(l, window, func(d time.Duration, f func()) { time.AfterFunc(d, f) })
}

func newWith(l hclog.Logger, window time.Duration, after func(time.Duration, func())) *Logger {
	return &Logger{Logger: l, c: &counts{window: window, after: after, held: map[string]*run{}}}
}

// Log writes msg with args, or counts it when an identical line was
// written within the window.
func (l *Logger) Log(level hclog.Level, msg string, args ...any) {
	if level < hclog.Warn || !l.Logger.IsWarn() {
		l.Logger.Log(level, msg, args...)
		return
	}
	key := l.key(level, msg, args)
	c := l.c
	c.mu.Lock()
	if r, ok := c.held[key]; ok {
		r.repeated++
		c.mu.Unlock()
		return
	}
	if len(c.held) >= maxKeys {
		c.mu.Unlock()
		l.Logger.Log(level, msg, args...)
		return
	}
	r := &run{}
	c.held[key] = r
	c.mu.Unlock()
	l.Logger.Log(level, msg, args...)
	// The args are copied: the caller may reuse its slice.
	kept := append([]any(nil), args...)
	c.after(c.window, func() {
		c.mu.Lock()
		n := r.repeated
		delete(c.held, key)
		c.mu.Unlock()
		if n > 0 {
			l.Logger.Log(level, msg, append(kept, "repeated", n, "within", c.window)...)
		}
	})
}

// key is what identical lines share: level, logger name, message, and
// every key and value (the logger's own, from With, too) but the
// volatile ones, in any order: the lines a plugin writes come to the host
// with their fields in an order that changes from line to line.
func (l *Logger) key(level hclog.Level, msg string, args []any) string {
	if implied := l.Logger.ImpliedArgs(); len(implied) > 0 {
		args = append(append([]any(nil), implied...), args...)
	}
	pairs := make([]string, 0, len(args)/2+1)
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && volatile(k) {
			continue
		}
		pairs = append(pairs, fmt.Sprintf("%v=%v", args[i], args[i+1]))
	}
	if len(args)%2 == 1 {
		pairs = append(pairs, fmt.Sprint(args[len(args)-1]))
	}
	slices.Sort(pairs)
	return fmt.Sprintf("%d\x00%s\x00%s\x00%s", level, l.Logger.Name(), msg, strings.Join(pairs, "\x00"))
}

// Trace logs at trace level.
func (l *Logger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }

// Debug logs at debug level.
func (l *Logger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }

// Info logs at info level.
func (l *Logger) Info(msg string, args ...any) { l.Log(hclog.Info, msg, args...) }

// Warn logs at warn level, collapsing repeats.
func (l *Logger) Warn(msg string, args ...any) { l.Log(hclog.Warn, msg, args...) }

// Error logs at error level, collapsing repeats.
func (l *Logger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

// With returns a logger with args on every line, sharing l's counts.
func (l *Logger) With(args ...any) hclog.Logger {
	return &Logger{Logger: l.Logger.With(args...), c: l.c}
}

// Named returns a named sub-logger sharing l's counts.
func (l *Logger) Named(name string) hclog.Logger {
	return &Logger{Logger: l.Logger.Named(name), c: l.c}
}

// ResetNamed returns a logger of that name sharing l's counts.
func (l *Logger) ResetNamed(name string) hclog.Logger {
	return &Logger{Logger: l.Logger.ResetNamed(name), c: l.c}
}
