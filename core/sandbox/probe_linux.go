package sandbox

import (
	"os"

	seccomp "github.com/elastic/go-seccomp-bpf"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Support is what this kernel and this host can enforce, found once when
// the host starts (Probe).
type Support struct {
	// LandlockABI is the kernel's Landlock version, 0 without Landlock.
	LandlockABI int
	// Seccomp is set when seccomp filters can be loaded on this kernel
	// and architecture.
	Seccomp bool
	// Root is set when the host runs as root: it can drop capabilities
	// and switch users.
	Root    bool
	cgroups cgroupParents
}

// Probe finds what can be enforced. On cgroup v2 it may move the host
// into a leaf of its own cgroup (see findCgroups).
func Probe() *Support {
	s := &Support{Root: os.Geteuid() == 0, Seccomp: seccomp.Supported() && seccompArchSupported()}
	if v, err := ll.LandlockGetABIVersion(); err == nil {
		s.LandlockABI = v
	}
	s.cgroups = findCgroups(os.Getpid())
	return s
}

// seccompArchSupported reports whether the filter library knows this
// architecture's system call numbers.
func seccompArchSupported() bool {
	p := seccompPolicy(&Spec{})
	_, err := p.Assemble()
	return err == nil
}

// Cgroups names the cgroup version in use for caps ("v1", "v2") or "".
func (s *Support) Cgroups() string {
	switch s.cgroups.version {
	case 1:
		return "v1"
	case 2:
		return "v2"
	}
	return ""
}

// Unenforced returns the rules this kernel cannot enforce for a process
// under p, each with the reason, in the order of Rules.
func (s *Support) Unenforced(p Policy) map[string]string {
	out := map[string]string{}
	// Memory is always capped: RLIMIT_AS stands in for a memory cgroup,
	// capping address space rather than memory, coarser but holding.
	if s.cgroups.pids == "" {
		out[RuleProcessCount] = "no writable pids cgroup"
	}
	if p.RunAs != "" && !s.Root {
		out[RuleUser] = "the host does not run as root"
	}
	if !s.Seccomp {
		out[RulePrivileges] = "seccomp is not available"
		out[RuleNetwork] = "seccomp is not available"
		out[RuleProcesses] = "seccomp is not available"
	}
	if s.LandlockABI < 1 {
		out[RuleFilesystem] = "Landlock is not available"
	}
	if s.LandlockABI < 6 {
		out[RuleSignals] = "Landlock ABI 6 or later is needed"
	}
	return out
}
