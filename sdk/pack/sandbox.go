package pack

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/wophost/wophost/sdk/internal/wire"
	"github.com/wophost/wophost/sdk/wop"
)

// The runtime requirement tokens (pack.json runtime.requires) a refused
// operation is attributed to, and the answer when none can be named.
const (
	requiresNetDNS      = "net.dns"
	requiresNetOutbound = "net.outbound"
	requiresSubprocess  = "subprocess"
	requiresFSRead      = "fs.read"
	requiresFSWrite     = "fs.write"
	requiresUnknown     = "unknown"
)

// contained reports whether the host runs this process contained: lookup
// (os.LookupEnv) finds wire.EnvSandbox. The value, the tokens granted,
// does not matter here: a sandbox that grants nothing still refuses.
func contained(lookup func(string) (string, bool)) bool {
	_, ok := lookup(wire.EnvSandbox)
	return ok
}

// sandboxDenial is the sandbox_capability_denied failure a contained
// pack reports for a node that failed with err, or nil when err holds no
// refused operation. An operation counts as refused when err's chain
// holds syscall.EPERM or syscall.EACCES, which is how Landlock and the
// seccomp filter answer; inside a sandbox the SDK cannot tell them from
// an ordinary permission error (a file of another user), so every such
// error of a contained pack reads as the sandbox's. The message keeps
// err's own text; details.requestedCapability names the requirement that
// would allow the operation (see refusedRequirement).
//
// An err that is, or wraps, a *wop.Error is the node's own answer and is
// left to it, whatever lies beside it in the chain.
func sandboxDenial(err error) *wop.Error {
	var we *wop.Error
	if err == nil || errors.As(err, &we) {
		return nil
	}
	req, ok := refusedRequirement(err)
	if !ok {
		return nil
	}
	note := " (refused by the sandbox; it needs runtime requirement " + req + ")"
	if req == requiresUnknown {
		note = " (refused by the sandbox)"
	}
	return wop.Errorf(wop.CodeSandboxCapabilityDenied, "%s%s", err.Error(), note).
		WithDetails(map[string]string{"requestedCapability": req})
}

// refusedRequirement reports whether err holds a refused operation and
// names the requirement that would have allowed it, from the standard
// library's error that carries the refusal:
//
//   - a *net.DNSError: net.dns. Go's resolver keeps only the text of the
//     error under it, so a lookup whose socket was refused is known by
//     its text ending with the errno's;
//   - an *exec.Error, an *os.PathError of "fork/exec" or an
//     *os.SyscallError of a system call that starts a process:
//     subprocess;
//   - a *net.OpError of a dial or a listen on an IP network: net.outbound
//     (a unix socket is no network; its refusal is a path's, unknown);
//   - an *os.PathError or *os.LinkError of an operation that writes
//     (mkdir, remove, rename, link, symlink, truncate, chmod, chown,
//     chtimes, write, and their *at forms): fs.write;
//   - an *os.PathError of "open" or "openat": fs.read, unless the path
//     opens for reading or does not exist, in which case the refused open
//     was one for writing or creating: fs.write (openIntent);
//   - anything else, a bare errno among them: unknown.
func refusedRequirement(err error) (string, bool) {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsRefused(dnsErr) {
		return requiresNetDNS, true
	}
	if !refused(err) {
		return "", false
	}
	var execErr *exec.Error
	if errors.As(err, &execErr) && refused(execErr) {
		return requiresSubprocess, true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && refused(opErr) {
		if (opErr.Op == "dial" || opErr.Op == "listen") && !strings.HasPrefix(opErr.Net, "unix") {
			return requiresNetOutbound, true
		}
		return requiresUnknown, true
	}
	var pathErr *os.PathError
	if errors.As(err, &pathErr) && refused(pathErr) {
		if pathErr.Op == "open" || pathErr.Op == "openat" {
			return openIntent(pathErr.Path, os.Open), true
		}
		if req := pathOpRequirement(pathErr.Op); req != "" {
			return req, true
		}
		return requiresUnknown, true
	}
	var linkErr *os.LinkError
	if errors.As(err, &linkErr) && refused(linkErr) {
		if req := pathOpRequirement(linkErr.Op); req != "" {
			return req, true
		}
		return requiresUnknown, true
	}
	var sysErr *os.SyscallError
	if errors.As(err, &sysErr) && refused(sysErr) && startsProcess(sysErr.Syscall) {
		return requiresSubprocess, true
	}
	return requiresUnknown, true
}

// refused reports whether err's chain holds the errno of a refused
// operation.
func refused(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)
}

// dnsRefused reports whether a lookup failed because an operation under
// it was refused, by its chain or, since the resolver keeps only the
// text of its cause, by that text's end.
func dnsRefused(e *net.DNSError) bool {
	return refused(e) || strings.HasSuffix(e.Err, syscall.EPERM.Error()) || strings.HasSuffix(e.Err, syscall.EACCES.Error())
}

// pathOpRequirement is the requirement an *os.PathError's or
// *os.LinkError's operation needs, or "" when none fits.
func pathOpRequirement(op string) string {
	switch op {
	case "fork/exec":
		return requiresSubprocess
	case "mkdir", "mkdirat", "mkdirtemp", "create", "createtemp",
		"remove", "removeat", "unlinkat",
		"rename", "renameat", "link", "linkat", "symlink", "symlinkat",
		"truncate", "chmod", "chmodat", "chown", "chownat", "lchown", "lchownat",
		"chtimes", "chtimesat", "write", "writeat":
		return requiresFSWrite
	}
	return ""
}

// openIntent names the requirement a refused open of path needed. The
// error does not say how the file was opened, so the path is opened
// again, for reading only: refused again, reading was what was refused;
// opened, or not there (a create), it was the write.
func openIntent(path string, open func(string) (*os.File, error)) string {
	f, err := open(path)
	if err == nil {
		f.Close()
		return requiresFSWrite
	}
	if errors.Is(err, fs.ErrNotExist) {
		return requiresFSWrite
	}
	return requiresFSRead
}

// startsProcess reports whether the system call named by an
// *os.SyscallError starts a process.
func startsProcess(syscallName string) bool {
	switch syscallName {
	case "fork/exec", "fork", "vfork", "clone", "clone3", "execve", "execveat":
		return true
	}
	return false
}
