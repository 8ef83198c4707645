package host

import (
	"fmt"
	"runtime"
	"time"
)

// RestartPolicy is how a crashed plugin or pack is brought back: the first
// attempt waits Base, each further one twice the wait before it, at most
// Cap; after Attempts failed attempts it is given up and stays failed.
type RestartPolicy struct {
	Base     time.Duration
	Cap      time.Duration
	Attempts int
	// After waits out one backoff, like time.After; nil is time.After. A
	// test sets it to see each wait the policy asks for, or to hold a
	// restart back for as long as it needs.
	After func(time.Duration) <-chan time.Time
}

// DefaultRestartPolicy is the policy of every host the command line starts:
// 0.5 s doubling to 30 s, five attempts.
func DefaultRestartPolicy() RestartPolicy {
	return RestartPolicy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, Attempts: 5}
}

// Options are the settings of a Host that do not come from host.hcl.
type Options struct {
	// Restart is the restart policy of crashed plugins and packs; the zero
	// value is DefaultRestartPolicy.
	Restart RestartPolicy
	// Launcher is the host binary, run to contain a process before it
	// execs its entry (package sandbox). Without one, no process is
	// contained and every rule is reported as not enforced.
	Launcher string
	// CPUs is the GOMAXPROCS the host process started with (Go's default,
	// the CPUs it may use, or its GOMAXPROCS variable), before the host
	// block's gomaxprocs applied; 0 means runtime.GOMAXPROCS(0) when the
	// host is made. The processes' default GOMAXPROCS is half of it.
	CPUs int
}

// withDefaults fills in what o leaves unset.
func (o Options) withDefaults() Options {
	def := DefaultRestartPolicy()
	if o.Restart.Base <= 0 {
		o.Restart.Base = def.Base
	}
	if o.Restart.Cap <= 0 {
		o.Restart.Cap = def.Cap
	}
	if o.Restart.Attempts <= 0 {
		o.Restart.Attempts = def.Attempts
	}
	if o.Restart.After == nil {
		o.Restart.After = time.After
	}
	if o.CPUs <= 0 {
		o.CPUs = runtime.GOMAXPROCS(0)
	}
	return o
}

// next is the wait after a wait of d.
func (p RestartPolicy) next(d time.Duration) time.Duration {
	return min(max(d*2, p.Base), p.Cap)
}

// gaveUp is the last error of a plugin or pack the host stopped
// restarting after attempts failed attempts, the last failing with last:
// the operator reads why in host plugins or host packs, not only in the
// log.
func gaveUp(attempts int, last error) error {
	if last == nil {
		return fmt.Errorf("gave up after %d restart attempts", attempts)
	}
	return fmt.Errorf("gave up after %d restart attempts, the last: %w", attempts, last)
}

// exitedUnexpectedly is the last error of a plugin or pack process (kind)
// that exited when the host did not ask it to, with what it wrote last to
// stderr, if anything.
func exitedUnexpectedly(kind, lastWords string) error {
	if lastWords == "" {
		return fmt.Errorf("%s process exited unexpectedly", kind)
	}
	return fmt.Errorf("%s process exited unexpectedly; the last it wrote to stderr: %s", kind, lastWords)
}
