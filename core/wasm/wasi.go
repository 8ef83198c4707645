package wasm

import (
	"math/rand/v2"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// unboundSeed seeds an instance's WASI random stream until Invoke binds the
// instance to an invocation, so that what _initialize reads is the same on
// every instance.
const unboundSeed = "wophost core/wasm unbound seed.."

// seededRand is an instance's WASI random_get source: a ChaCha8 stream, so
// that the bytes are a function of the seed alone.
type seededRand struct {
	mu  sync.Mutex
	src *rand.ChaCha8
}

func newSeededRand() *seededRand {
	return &seededRand{src: rand.NewChaCha8([32]byte([]byte(unboundSeed)))}
}

// bind restarts the stream from the invocation's seed.
func (r *seededRand) bind(seed [32]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.src = rand.NewChaCha8(seed)
}

// Read implements io.Reader.
func (r *seededRand) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.src.Read(p)
}

// Bounds on what an instance may write to stdout or stderr.
const (
	maxLogLine   = 4 << 10
	maxLogOutput = 1 << 20
)

// lineLogger turns an instance's stdout or stderr into log lines. A line
// longer than maxLogLine is cut, and past maxLogOutput bytes in all the
// rest is dropped, so a flood cannot exhaust the host.
type lineLogger struct {
	logger hclog.Logger
	level  hclog.Level
	stream string

	mu      sync.Mutex
	line    []byte
	cut     bool
	written int
	dropped bool
}

func newLineLogger(logger hclog.Logger, level hclog.Level, stream string) *lineLogger {
	return &lineLogger{logger: logger, level: level, stream: stream}
}

// Write implements io.Writer; it never fails, so the module is not stopped
// by its own logging.
func (w *lineLogger) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range p {
		if w.written >= maxLogOutput {
			if !w.dropped {
				w.dropped = true
				w.flushLocked()
				w.logger.Warn("the module's output passed its bound; the rest is dropped",
					"stream", w.stream, "bound_bytes", maxLogOutput)
			}
			break
		}
		w.written++
		if c == '\n' {
			w.flushLocked()
			continue
		}
		if len(w.line) < maxLogLine {
			w.line = append(w.line, c)
		} else {
			w.cut = true
		}
	}
	return len(p), nil
}

// flush logs a last line without its newline.
func (w *lineLogger) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushLocked()
}

func (w *lineLogger) flushLocked() {
	if len(w.line) == 0 && !w.cut {
		return
	}
	args := []any{"stream", w.stream}
	if w.cut {
		args = append(args, "cut_at_bytes", maxLogLine)
	}
	w.logger.Log(w.level, string(w.line), args...)
	w.line = w.line[:0]
	w.cut = false
}
