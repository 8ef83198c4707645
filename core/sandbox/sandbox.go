// Package sandbox contains the processes the host starts: a pack (or a
// plugin whose block asks for it) is started through a launcher, the host
// binary re-executed, which confines itself and then execs the process's
// entry. Confinement applied before exec holds for the entry and for
// everything it could start, since Landlock domains, seccomp filters,
// no_new_privs, dropped capabilities and cgroup membership are inherited
// and cannot be undone.
//
// The launcher applies, in order: membership of a cgroup of its own for
// memory and processes (or rlimits where no cgroup controller is
// writable), no_new_privs, a Landlock ruleset, the user and group to run
// as, the drop of every capability and a seccomp filter. The host side
// (Prepare) decides what each start gets from the policy, the pack's
// declared requirements and what the kernel supports (Probe), and tells
// the launcher in one environment variable that the launcher removes
// before exec.
package sandbox

import (
	"slices"
	"strings"
)

// Requirement tokens of OpenWOP's runtime.requires[] that change what a
// contained process may do. The others (crypto, clock) are granted to
// every pack: nothing is contained for them.
const (
	NetDNS      = "net.dns"
	NetOutbound = "net.outbound"
	Subprocess  = "subprocess"
	FSRead      = "fs.read"
	FSWrite     = "fs.write"
	EnvRead     = "env.read"
)

// Rule names, as reported in the advertisement, in `host packs` and in
// logs: each is one thing a contained process may not do, and is enforced
// or not on this kernel.
const (
	// RuleFilesystem: no file outside the process's own directories.
	RuleFilesystem = "filesystem"
	// RuleNetwork: no socket but AF_UNIX, no TCP connect or bind.
	RuleNetwork = "network"
	// RuleProcesses: no new process and no program but the entry.
	RuleProcesses = "processes"
	// RuleMemory: a memory cap.
	RuleMemory = "memory"
	// RuleProcessCount: a cap on processes and threads.
	RuleProcessCount = "process_count"
	// RulePrivileges: no capabilities, no_new_privs, no dangerous system
	// calls (mount, ptrace, bpf, module loading, ...).
	RulePrivileges = "privileges"
	// RuleSignals: no signal to, and no abstract socket of, a process
	// outside the sandbox.
	RuleSignals = "ipc"
	// RuleUser: a separate user and group (run_as).
	RuleUser = "run_as"
	// RuleEnvironment: none of the host's environment but the protocol's
	// variables and the operator's.
	RuleEnvironment = "environment"
)

// Rules lists every rule, in the order the launcher applies them.
func Rules() []string {
	return []string{RuleMemory, RuleProcessCount, RuleUser, RulePrivileges, RuleFilesystem, RuleSignals, RuleNetwork, RuleProcesses, RuleEnvironment}
}

// Policy is what the operator allows one process (the sandbox block).
type Policy struct {
	// Allow lists the requirement tokens the operator grants.
	Allow []string
	// MemoryBytes and Processes are the caps; 0 sets none.
	MemoryBytes int64
	Processes   int
	// ReadPaths and WritePaths are granted with fs.read and fs.write.
	ReadPaths  []string
	WritePaths []string
	// RunAs is "name", "name:group" or "uid:gid"; "" keeps the host's user.
	RunAs string
	// ConnectPorts are TCP ports the process may connect to whatever it
	// declared: the trace collector's, when the host exports traces, for
	// the process's spans. Internet sockets are then allowed, and TCP
	// connects held to these ports by Landlock (ABI 4 and later).
	ConnectPorts []uint16
}

// Grants is what a contained process may do beyond the default, the
// requirements it declared that the operator's policy allows.
type Grants struct {
	// Network is "" (none), NetDNS (TCP connects to port 53 and the
	// resolver's files) or NetOutbound (any socket family).
	Network    string
	Subprocess bool
	// FSRead and FSWrite grant the operator's read_paths and
	// write_paths, ReadPaths and WritePaths.
	FSRead     bool
	FSWrite    bool
	ReadPaths  []string
	WritePaths []string
	// Env gives the process the host's base environment (env.read).
	Env bool
}

// Tokens returns the granted requirements as a sorted, comma-separated
// list, the value of the environment variable a contained process gets.
func (g Grants) Tokens() string {
	var out []string
	if g.Network != "" {
		out = append(out, g.Network)
		if g.Network == NetOutbound {
			out = append(out, NetDNS)
		}
	}
	if g.Subprocess {
		out = append(out, Subprocess)
	}
	if g.FSRead {
		out = append(out, FSRead)
	}
	if g.FSWrite {
		out = append(out, FSWrite)
	}
	if g.Env {
		out = append(out, EnvRead)
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ",")
}

// Unmet returns the declared requirements that allowed does not grant,
// in the order declared. crypto and clock are always granted; net.dns is
// granted by net.outbound too, a coarser grant covering the finer one.
func Unmet(declared, allowed []string) []string {
	var out []string
	for _, r := range declared {
		switch {
		case r == "crypto" || r == "clock":
		case slices.Contains(allowed, r):
		case r == NetDNS && slices.Contains(allowed, NetOutbound):
		default:
			out = append(out, r)
		}
	}
	return out
}

// Grant returns what a process that declared declared gets under a policy
// allowing allowed, with the operator's extra paths.
func Grant(declared, allowed, readPaths, writePaths []string) Grants {
	has := func(r string) bool { return slices.Contains(declared, r) && len(Unmet([]string{r}, allowed)) == 0 }
	var g Grants
	switch {
	case has(NetOutbound):
		g.Network = NetOutbound
	case has(NetDNS):
		g.Network = NetDNS
	}
	g.Subprocess = has(Subprocess)
	if g.FSRead = has(FSRead); g.FSRead {
		g.ReadPaths = slices.Clone(readPaths)
	}
	if g.FSWrite = has(FSWrite); g.FSWrite {
		g.WritePaths = slices.Clone(writePaths)
	}
	g.Env = has(EnvRead)
	return g
}
