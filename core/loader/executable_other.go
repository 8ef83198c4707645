//go:build !linux

package loader

import (
	"os"
	"path/filepath"
)

// execPath is the path the process is started from. Without /proc there
// is no path to an open descriptor that exec accepts, so the binary is
// started by its name: the checks ran on the file that name led to when
// it was opened, and a swap in between is not caught here as it is on
// Linux.
func (e *Executable) execPath() string { return e.path }

// reachable has nothing to check where the binary is started by name.
func (e *Executable) reachable() error { return nil }

// openedPath returns where the binary named path lies, its links
// resolved.
func openedPath(_ *os.File, path string) (string, error) {
	return filepath.EvalSymlinks(path)
}
