package loader

import (
	"fmt"
	"os"
	"strconv"
)

// execPath is the path the process is started from: the host's own
// descriptor of the open binary, under /proc/<host pid>/fd. The kernel
// resolves it to the file the descriptor holds, whatever has become of
// the binary's path since it was opened. It is the host's pid rather
// than "self" because the path must name the same file on both sides of
// the fork: go-plugin hashes the file at the command's path in the host
// when a checksum is set, and the child execs it after the fork, when
// "self" would be the child, whose descriptor numbers differ. The host
// keeps the descriptor open until the process has started, and the child
// may read the host's descriptors: it is the host's own child, of the
// same user. A script's interpreter opens the same path once started,
// which holds as long as the host's descriptor is open.
func (e *Executable) execPath() string {
	return "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.FormatUint(uint64(e.file.Fd()), 10)
}

// reachable checks that execPath leads to the open file, so that a host
// without /proc fails at once with its reason rather than with exec's
// "no such file".
func (e *Executable) reachable() error {
	fi, err := os.Stat(e.execPath())
	if err != nil {
		return fmt.Errorf("binary %s: cannot reach the opened file through /proc, which the host execs it from (is /proc mounted?): %w", e.path, err)
	}
	if !os.SameFile(fi, e.info) {
		return fmt.Errorf("binary %s: %s is not the opened file", e.path, e.execPath())
	}
	return nil
}

// openedPath returns where the open file f actually lies, as the kernel
// records it for the descriptor.
func openedPath(f *os.File, _ string) (string, error) {
	return os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(f.Fd()), 10))
}
