package logdedup

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// windows ends each counting window when the test says so.
type windows struct {
	mu  sync.Mutex
	end []func()
}

func (w *windows) after(_ time.Duration, f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.end = append(w.end, f)
}

// close ends every window open now.
func (w *windows) close() {
	w.mu.Lock()
	end := w.end
	w.end = nil
	w.mu.Unlock()
	for _, f := range end {
		f()
	}
}

func newTest(level hclog.Level) (*Logger, *windows, *bytes.Buffer) {
	var out bytes.Buffer
	w := &windows{}
	inner := hclog.New(&hclog.LoggerOptions{Output: &out, Level: level})
	return newWith(inner, Window, w.after), w, &out
}

func lines(out *bytes.Buffer) []string {
	return strings.Split(strings.TrimSpace(out.String()), "\n")
}

// A storm of one error is one line, then one more with its count.
func TestStormIsOneLineAndItsCount(t *testing.T) {
	l, w, out := newTest(hclog.Info)
	err := errors.New("dial tcp 127.0.0.1:5432: connection refused")
	for i := range 80000 {
		l.Error("idempotency claim not written", "error", err, "store", "idempotency", "run_id", i, "attempt", i%5)
	}
	// The same fields in another order are the same line.
	l.Error("idempotency claim not written", "attempt", 9, "store", "idempotency", "error", err)
	if got := lines(out); len(got) != 1 || !strings.Contains(got[0], "idempotency claim not written") {
		t.Fatalf("during the window: %d lines, want 1: %q", len(got), got[:min(3, len(got))])
	}
	w.close()
	got := lines(out)
	if len(got) != 2 || !strings.Contains(got[1], "repeated=80000") || !strings.Contains(got[1], "connection refused") {
		t.Fatalf("after the window: %q, want the line again with repeated=80000", got)
	}
	// The next window starts afresh: its first line is written at once.
	l.Error("idempotency claim not written", "store", "idempotency", "error", err)
	w.close()
	if got := lines(out); len(got) != 3 || strings.Contains(got[2], "repeated") {
		t.Errorf("a line after the window: %q, want it written as it came, with no count", got)
	}
}

// Lines that differ in anything but a volatile value are each written,
// the near miss included: the same message with another error, another
// level, another logger name or another With value.
func TestDifferentLinesAreEachWritten(t *testing.T) {
	l, w, out := newTest(hclog.Info)
	l.Error("call failed", "error", "a")
	l.Error("call failed", "error", "b")
	l.Warn("call failed", "error", "a")
	l.Error("call failed", "error", "a", "family", "mcp")
	l.Named("promptLibrary").Error("call failed", "error", "a")
	l.With("capability", "x").Error("call failed", "error", "a")
	l.With("capability", "y").Error("call failed", "error", "a")
	l.Error("call failed.", "error", "a")
	if got := lines(out); len(got) != 8 {
		t.Fatalf("%d lines, want 8: %q", len(got), got)
	}
	w.close()
	if got := lines(out); len(got) != 8 {
		t.Errorf("after the window %d lines, want no count for lines seen once: %q", len(got), got)
	}
	// A named sub-logger shares the counts of the logger it came from.
	sub := l.Named("aiEnvelope")
	for range 3 {
		sub.Warn("database unreachable")
		l.Named("aiEnvelope").Warn("database unreachable")
	}
	w.close()
	got := lines(out)
	if len(got) != 10 || !strings.Contains(got[9], "repeated=5") {
		t.Errorf("six lines of two sub-loggers of one name: %q, want one and repeated=5", got[8:])
	}
}

// Below warn every line is written: debug output is for seeing each one.
func TestBelowWarnPassesThrough(t *testing.T) {
	l, w, out := newTest(hclog.Debug)
	for range 5 {
		l.Info("reloaded")
		l.Debug("call", "family", "mcp")
	}
	w.close()
	if got := lines(out); len(got) != 10 {
		t.Errorf("%d lines, want all 10", len(got))
	}
}

// Past maxKeys distinct lines at once, lines are written as they come:
// memory stays bounded, nothing is lost.
func TestDistinctLinesBeyondTheBoundAreWritten(t *testing.T) {
	l, w, out := newTest(hclog.Info)
	for i := range maxKeys + 10 {
		l.Error("x", "error", i)
		l.Error("x", "error", i)
	}
	if got := lines(out); len(got) != maxKeys+20 {
		t.Errorf("%d lines, want %d: one per line counted, every line past the bound", len(got), maxKeys+20)
	}
	if n := len(l.c.held); n != maxKeys {
		t.Errorf("%d lines held, want the bound %d", n, maxKeys)
	}
	w.close()
	if n := len(l.c.held); n != 0 {
		t.Errorf("%d lines still held after their windows", n)
	}
}
