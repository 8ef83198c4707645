package sandbox

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"sync"
)

// Process is one contained start, prepared by Support.Prepare: the spec
// the launcher applies and the host's resources for it (a cgroup, a
// private temporary directory). Close it once the process has exited.
type Process struct {
	// stateDir is the process's own directory for state, "" for none;
	// stateFile holds it open for a process run as another user (Wrap).
	stateDir  string
	stateFile *os.File
	// stateSeen is stateDir as the process names it, set by Wrap: a
	// /proc/self/fd path for a process run as another user.
	stateSeen string
	// mu orders MemoryExceeded, which the host asks when a run fails,
	// with Close, which removes the cgroup it reads.
	mu       sync.Mutex
	oomKills int
	// memoryLimit is the memory cap, kept from Prepare: Close forgets the
	// cgroup, and the host asks for the cap after the process was killed
	// for it, which may be after Close.
	memoryLimit int64
	spec        Spec
	cgroup      *Cgroup
	tmp         string
	grants      Grants
	user        *ids
	skipped     map[string]string
}

type ids struct{ uid, gid int }

// Prepare readies a contained start of the entry open as entry (the
// binary the host checked, sha256 its pin or "") of a process that lives
// in dir, declared the requirements declared, and keeps its state in
// stateDir ("" for none), under p. Rules the kernel cannot enforce are
// left out and reported by Skipped.
func (s *Support) Prepare(name string, p Policy, declared []string, dir, stateDir string, entry *os.File, sha256 string) (*Process, error) {
	g := Grant(declared, p.Allow, p.ReadPaths, p.WritePaths)
	proc := &Process{grants: g, skipped: s.Unenforced(p), stateDir: stateDir}
	if p.RunAs != "" && s.Root {
		u, err := lookupRunAs(p.RunAs)
		if err != nil {
			return nil, err
		}
		proc.user = u
	}
	ok := false
	defer func() {
		if !ok {
			proc.Close()
		}
	}()
	tmp, err := os.MkdirTemp("", "wophost-px-")
	if err != nil {
		return nil, fmt.Errorf("private temporary directory: %w", err)
	}
	proc.tmp = tmp
	owned := []string{tmp}
	if stateDir != "" {
		if err := os.MkdirAll(stateDir, 0o700); err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
		owned = append(owned, stateDir)
	}
	if proc.user != nil {
		for _, d := range owned {
			if err := os.Chown(d, proc.user.uid, proc.user.gid); err != nil {
				return nil, fmt.Errorf("run_as: give %s to %d:%d: %w", d, proc.user.uid, proc.user.gid, err)
			}
		}
	}
	spec := Spec{
		ExecFD:           -1,
		SHA256:           sha256,
		DropCapabilities: s.Root,
		Landlock:         s.LandlockABI > 0,
		Seccomp:          s.Seccomp,
		Network:          g.Network,
		ConnectPorts:     p.ConnectPorts,
		Subprocess:       g.Subprocess,
		ReadExec:         []string{dir},
		ReadWrite:        append(owned, g.WritePaths...),
		Read:             append([]string{"/dev/urandom", "/dev/zero", "/etc/localtime", "/usr/share/zoneinfo"}, g.ReadPaths...),
	}
	// /dev/null is written as well as read by programs that discard output.
	spec.ReadWrite = append(spec.ReadWrite, "/dev/null")
	runtimeNeeds, script, err := runtimePaths(entry)
	if err != nil {
		return nil, err
	}
	spec.Script = script
	spec.ReadExec = append(spec.ReadExec, runtimeNeeds.readExec...)
	spec.Read = append(spec.Read, runtimeNeeds.read...)
	if g.Network != "" {
		spec.Read = append(spec.Read, resolverFiles()...)
	}
	if g.Subprocess {
		spec.ReadExec = append(spec.ReadExec, systemPrograms()...)
		spec.Read = append(spec.Read, "/etc/ld.so.cache")
	}
	if proc.user != nil {
		spec.SwitchUser, spec.UID, spec.GID = true, proc.user.uid, proc.user.gid
	}
	if p.MemoryBytes > 0 || p.Processes > 0 {
		cg, err := newCgroup(s.cgroups, name, p.MemoryBytes, p.Processes)
		if err != nil {
			return nil, err
		}
		proc.cgroup = cg
		spec.Cgroups = cg.procsFiles()
		if !cg.MemoryCapped() && p.MemoryBytes > 0 {
			spec.AddressSpace = uint64(p.MemoryBytes)
		}
		proc.memoryLimit = int64(spec.AddressSpace)
		if cg.MemoryCapped() {
			proc.memoryLimit = cg.Limit
		}
	}
	proc.spec = spec
	ok = true
	return proc, nil
}

// lookupRunAs resolves run_as to ids: "uid:gid" as given, a name through
// the system's user database, its primary group unless one is named.
func lookupRunAs(runAs string) (*ids, error) {
	name, group, hasGroup := strings.Cut(runAs, ":")
	uid, errU := strconv.Atoi(name)
	gid, errG := strconv.Atoi(group)
	if errU == nil && hasGroup && errG == nil {
		return &ids{uid, gid}, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("run_as %q: %w", runAs, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	if hasGroup {
		g, err := user.LookupGroup(group)
		if err != nil {
			return nil, fmt.Errorf("run_as %q: %w", runAs, err)
		}
		gid, _ = strconv.Atoi(g.Gid)
	}
	if uid == 0 {
		return nil, fmt.Errorf("run_as %q: is root; name a user without privileges", runAs)
	}
	return &ids{uid, gid}, nil
}

// needs are the paths the entry's runtime reads and executes to start.
type needs struct{ readExec, read []string }

// runtimePaths finds what the entry needs beyond its own directory: a
// dynamically linked binary its ELF interpreter and shared libraries, a
// script its interpreter and the system's programs and libraries.
func runtimePaths(entry *os.File) (needs, bool, error) {
	head := make([]byte, 256)
	n, err := entry.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return needs{}, false, fmt.Errorf("read the entry: %w", err)
	}
	head = head[:n]
	if bytes.HasPrefix(head, []byte("#!")) {
		return needs{readExec: systemPrograms(), read: []string{"/etc/ld.so.cache"}}, true, nil
	}
	f, err := elf.NewFile(entry)
	if err != nil {
		// Not ELF: the kernel will refuse to exec it, and say so.
		return needs{}, false, nil
	}
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(prog.Open())
		if err != nil {
			return needs{}, false, fmt.Errorf("read the entry's interpreter: %w", err)
		}
		interp := string(bytes.TrimRight(b, "\x00"))
		return needs{readExec: []string{interp}, read: libraryDirs()}, false, nil
	}
	return needs{}, false, nil
}

// libraryDirs are where the dynamic loader finds shared libraries.
func libraryDirs() []string {
	return []string{"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/etc/ld.so.cache"}
}

// systemPrograms are the directories of the system's programs and their
// libraries, executable with subprocess or by a script's interpreter.
func systemPrograms() []string {
	return []string{"/bin", "/sbin", "/usr", "/lib", "/lib64"}
}

// resolverFiles are what name resolution and TLS verification read.
func resolverFiles() []string {
	return []string{"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/host.conf",
		"/etc/ssl", "/etc/pki", "/etc/ca-certificates", "/usr/share/ca-certificates"}
}

// Wrap turns cmd, prepared to run the entry, into the launcher's command:
// the host binary launcher with LaunchArg, the entry as its open
// descriptor, and the spec. Call it once the command's other descriptors
// are attached.
func (p *Process) Wrap(cmd *exec.Cmd, launcher string, entry *os.File) error {
	stateDir := p.stateDir
	if p.user != nil && stateDir != "" {
		// The state directory lies in the host's, which another user may
		// not traverse; the process reaches it through a descriptor the
		// host opened, whose /proc link leads there without the walk.
		f, err := os.Open(stateDir)
		if err != nil {
			return fmt.Errorf("open the state directory: %w", err)
		}
		p.stateFile = f
		stateDir = "/proc/self/fd/" + strconv.Itoa(3+len(cmd.ExtraFiles))
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	}
	p.spec.ExecFD = 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, entry)
	enc, err := encodeSpec(&p.spec)
	if err != nil {
		return err
	}
	cmd.Args = append([]string{launcher, LaunchArg}, cmd.Args...)
	cmd.Path = launcher
	cmd.Env = append(cmd.Env, specEnv+"="+enc, GrantsEnv+"="+p.grants.Tokens(), "TMPDIR="+p.tmp)
	if p.stateDir != "" {
		cmd.Env = append(cmd.Env, StateDirEnv+"="+stateDir)
	}
	p.stateSeen = stateDir
	return nil
}

// StateDir is the process's state directory as the process names it (its
// WOPHOST_STATE_DIR), once Wrap ran; "" for none.
func (p *Process) StateDir() string { return p.stateSeen }

// Grants is what the process was granted.
func (p *Process) Grants() Grants { return p.grants }

// Skipped names the rules not enforced for this process, with why.
func (p *Process) Skipped() map[string]string { return p.skipped }

// TempDir is the process's private temporary directory, "" once Close
// removed it.
func (p *Process) TempDir() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tmp
}

// SocketGroup is the group the host's sockets for this process must be
// open to ("" when it runs as the host's user).
func (p *Process) SocketGroup() string {
	if p.user == nil {
		return ""
	}
	return strconv.Itoa(p.user.gid)
}

// MemoryLimit is the memory cap in bytes, 0 for none.
func (p *Process) MemoryLimit() int64 { return p.memoryLimit }

// MemoryExceeded reports whether the kernel killed the process for its
// memory cap, before or after Close.
func (p *Process) MemoryExceeded() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.cgroup.OOMKills(); n > p.oomKills {
		p.oomKills = n
	}
	return p.oomKills > 0
}

// Close removes the process's cgroup and temporary directory. The
// process must have exited. Safe to call more than once.
func (p *Process) Close() {
	p.MemoryExceeded()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cgroup.Remove()
	if p.stateFile != nil {
		p.stateFile.Close()
		p.stateFile = nil
	}
	if p.tmp != "" {
		_ = os.RemoveAll(p.tmp)
		p.tmp = ""
	}
}

// LaunchFailure returns what the launcher said when it could not start
// the entry, found in the process's stderr, and whether it said anything.
func LaunchFailure(stderr string) (string, bool) {
	i := strings.Index(stderr, launchFailurePrefix)
	if i < 0 {
		return "", false
	}
	return strings.TrimSpace(strings.SplitN(stderr[i+len(launchFailurePrefix):], "\n", 2)[0]), true
}

// ChecksumMismatch returns the digest the launcher found when the entry
// no longer matched its pin just before exec.
func ChecksumMismatch(stderr string) (string, bool) {
	said, ok := LaunchFailure(stderr)
	if !ok || !strings.HasPrefix(said, checksumMismatch) {
		return "", false
	}
	return strings.Fields(strings.TrimPrefix(said, checksumMismatch))[0], true
}
