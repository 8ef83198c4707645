// Package procutil holds the process plumbing both SDK entry points share:
// the logger a plugin process writes and the parent-death watchdog.
package procutil

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/sdk/internal/wire"
)

// Logger returns the JSON logger a plugin process writes to stderr. The
// host parses the lines and re-emits them under the plugin's name, at the
// level the host passed in the environment.
func Logger(name string) hclog.Logger {
	level := hclog.LevelFromString(os.Getenv(wire.EnvLogLevel))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      level,
		Output:     os.Stderr,
		JSONFormat: true,
	})
}

// WatchParent exits the process once its parent is gone, so that no plugin
// outlives a host that was killed with SIGKILL. It polls, because
// Pdeathsig fires when the parent thread exits rather than the process and
// exists only on Linux.
func WatchParent(logger hclog.Logger, onExit func()) {
	parent := os.Getppid()
	if parent <= 1 {
		// Started by init or a reaper already: no parent to watch.
		return
	}
	// Once the host is gone, stderr, where the logger writes, is a pipe
	// nobody reads, and Go's runtime kills a process with SIGPIPE for a
	// write to fd 2 that finds it broken: the line below, or any other,
	// would end the process before onExit. Ignored, such a write fails
	// with EPIPE (the line is lost) and the process exits as it should.
	signal.Ignore(syscall.SIGPIPE)
	go func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for range t.C {
			if os.Getppid() != parent {
				logger.Warn("host process is gone; exiting", "parent_pid", parent)
				if onExit != nil {
					onExit()
				}
				os.Exit(3)
			}
		}
	}()
}
