//go:build !linux

package sandbox

import (
	"errors"
	"os"
	"os/exec"
)

// Support is what this system can enforce: nothing, off Linux.
type Support struct {
	LandlockABI int
	Seccomp     bool
	Root        bool
}

// Probe finds what can be enforced: nothing, off Linux.
func Probe() *Support { return &Support{} }

// Cgroups names the cgroup version in use: none, off Linux.
func (s *Support) Cgroups() string { return "" }

// Unenforced returns every rule but the environment's: none is enforced
// off Linux.
func (s *Support) Unenforced(Policy) map[string]string {
	out := map[string]string{}
	for _, r := range Rules() {
		if r != RuleEnvironment {
			out[r] = "containment is implemented on Linux only"
		}
	}
	return out
}

// Process is one contained start; off Linux there is none.
type Process struct{}

// Prepare fails off Linux: a host there starts its processes uncontained.
func (s *Support) Prepare(string, Policy, []string, string, string, *os.File, string) (*Process, error) {
	return nil, errors.New("containment is implemented on Linux only")
}

// Wrap is never reached off Linux.
func (p *Process) Wrap(*exec.Cmd, string, *os.File) error {
	return errors.New("containment is implemented on Linux only")
}

// Grants is what the process was granted.
func (p *Process) Grants() Grants { return Grants{} }

// Skipped names the rules not enforced for this process.
func (p *Process) Skipped() map[string]string { return nil }

// TempDir is the process's private temporary directory.
func (p *Process) TempDir() string { return "" }

// StateDir is the state directory as the process names it: none here.
func (p *Process) StateDir() string { return "" }

// SocketGroup is the group the host's sockets must be open to.
func (p *Process) SocketGroup() string { return "" }

// MemoryLimit is the memory cap in bytes.
func (p *Process) MemoryLimit() int64 { return 0 }

// MemoryExceeded reports whether the process was killed for memory.
func (p *Process) MemoryExceeded() bool { return false }

// Close releases the process's resources.
func (p *Process) Close() {}

// IsLaunch is false off Linux.
func IsLaunch([]string) bool { return false }

// Launch is never reached off Linux.
func Launch([]string) int { return 1 }

// LaunchFailure finds nothing off Linux.
func LaunchFailure(string) (string, bool) { return "", false }

// ChecksumMismatch finds nothing off Linux.
func ChecksumMismatch(string) (string, bool) { return "", false }
