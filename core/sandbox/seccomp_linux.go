package sandbox

import (
	"fmt"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// privileged are the system calls no contained process makes: each
// changes the system rather than the process, reaches into another
// process, or opens a way around the other rules (io_uring makes sockets
// and opens files without the system calls filtered here).
func privileged() []string {
	return []string{
		"mount", "umount2", "pivot_root", "chroot", "swapon", "swapoff", "reboot",
		"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
		"bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
		"ptrace", "process_vm_readv", "process_vm_writev", "setns", "unshare",
		"open_by_handle_at", "name_to_handle_at", "acct", "quotactl", "syslog",
		"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm",
		"io_uring_setup", "io_uring_enter", "io_uring_register", "fanotify_init",
	}
}

// seccompPolicy is the filter for spec: everything is allowed but what a
// rule refuses, each refusal answered with an error the process sees.
func seccompPolicy(spec *Spec) seccomp.Policy {
	groups := []seccomp.SyscallGroup{{Action: seccomp.ActionErrno, Names: privileged()}}
	if !spec.Subprocess {
		groups = append(groups,
			seccomp.SyscallGroup{
				Action: seccomp.ActionErrno,
				Names:  []string{"fork", "vfork"},
				// A new thread is a clone with CLONE_THREAD; anything else
				// is a new process.
				NamesWithCondtions: []seccomp.NameWithConditions{{
					Name:       "clone",
					Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.BitsNotSet, Value: unix.CLONE_THREAD}},
				}},
			},
			// clone3's flags are in memory a filter cannot read; ENOSYS
			// makes a C library fall back to clone, which is filtered.
			seccomp.SyscallGroup{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
		)
	}
	if spec.Network == networkNone && len(spec.ConnectPorts) == 0 {
		groups = append(groups, seccomp.SyscallGroup{
			Action: seccomp.ActionErrno,
			NamesWithCondtions: []seccomp.NameWithConditions{{
				Name:       "socket",
				Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_UNIX}},
			}},
		})
	}
	return seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: groups}
}

// applySeccomp loads the filter on every thread of the process; it holds
// for the entry after exec and for whatever it starts.
func applySeccomp(spec *Spec) error {
	f := seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: seccompPolicy(spec)}
	if err := seccomp.LoadFilter(f); err != nil {
		return fmt.Errorf("apply seccomp: %w", err)
	}
	return nil
}
