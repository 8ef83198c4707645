package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// IsLaunch reports whether args (os.Args) start the launcher rather than
// the host: the host execs itself with LaunchArg first. A program that
// starts contained processes calls Launch when it is true, before
// anything else.
func IsLaunch(args []string) bool {
	return len(args) > 1 && args[1] == LaunchArg && os.Getenv(specEnv) != ""
}

// Launch is the launcher: it confines the process as the host's Spec
// says and execs the entry, with args[2:] as its arguments (args[2] being
// the entry's name as the host knows it). It returns only when something
// failed, with the exit status to end with, having said what on stderr.
func Launch(args []string) int {
	// Capabilities, the bounding set and the exec are per thread: all of
	// them happen on this one.
	runtime.LockOSThread()
	spec, err := decodeSpec(os.Getenv(specEnv))
	if err == nil {
		err = os.Unsetenv(specEnv)
	}
	if err == nil {
		err = confineAndExec(spec, args[2:])
	}
	fmt.Fprintf(os.Stderr, "%s%v\n", launchFailurePrefix, err)
	return 126
}

// launchFailurePrefix starts the line the launcher writes when it cannot
// start the entry; the host recognises it in the process's stderr.
const launchFailurePrefix = "wophost-launch: "

// checksumMismatch is how the launcher names an entry that no longer
// matches its pin; the actual digest follows.
const checksumMismatch = "sha256 mismatch, actual "

func confineAndExec(spec *Spec, argv []string) error {
	if len(argv) == 0 {
		return errors.New("no entry to exec")
	}
	for _, f := range spec.Cgroups {
		if err := os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return fmt.Errorf("join cgroup: %w", err)
		}
	}
	if spec.AddressSpace > 0 {
		lim := unix.Rlimit{Cur: spec.AddressSpace, Max: spec.AddressSpace}
		if err := unix.Setrlimit(unix.RLIMIT_AS, &lim); err != nil {
			return fmt.Errorf("set RLIMIT_AS: %w", err)
		}
	}
	if spec.DropCapabilities {
		// The bounding set goes first: dropping from it needs
		// CAP_SETPCAP, which switching user takes away.
		if err := dropBoundingSet(); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	if spec.Landlock {
		// Before the switch of user: the ruleset opens each of its paths,
		// and the user the process runs as may be unable to reach them
		// (a state_dir of mode 0700, a pack under a private directory).
		// The rules hold the same after the switch; what the new user may
		// open is then bounded by both the rules and its own permissions.
		if err := applyLandlock(spec); err != nil {
			return err
		}
	}
	if spec.SwitchUser {
		if err := switchUser(spec.UID, spec.GID); err != nil {
			return err
		}
	}
	if spec.DropCapabilities {
		if err := dropCapabilities(); err != nil {
			return err
		}
	}
	if spec.SHA256 != "" {
		if err := checkDigest(spec.ExecFD, spec.SHA256); err != nil {
			return err
		}
	}
	if !spec.Script {
		// An ELF entry is read by the kernel at exec: the pack need not
		// keep a descriptor of its own binary.
		unix.CloseOnExec(spec.ExecFD)
	}
	if spec.Seccomp {
		if err := applySeccomp(spec); err != nil {
			return err
		}
	}
	return execFD(spec.ExecFD, argv, os.Environ())
}

// switchUser makes the process uid:gid with no supplementary groups. Go
// applies each to every thread of the process.
func switchUser(uid, gid int) error {
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("run_as: drop supplementary groups: %w", err)
	}
	if err := syscall.Setresgid(gid, gid, gid); err != nil {
		return fmt.Errorf("run_as: set group %d: %w", gid, err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("run_as: set user %d: %w", uid, err)
	}
	return nil
}

// dropBoundingSet removes every capability from the bounding set, so
// that no exec can gain one back, even as root. Without CAP_SETPCAP
// (the host is not root) there is nothing to drop.
func dropBoundingSet() error {
	last, err := lastCapability()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}

// dropCapabilities empties the ambient, effective, permitted and
// inheritable sets.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	return nil
}

// lastCapability is the highest capability number the kernel knows.
func lastCapability() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("read the last capability: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("read the last capability: %w", err)
	}
	return n, nil
}

// checkDigest hashes the open entry once more, just before exec, so that
// a binary changed in place after the host checked it does not run.
func checkDigest(fd int, want string) error {
	h := sha256.New()
	r := io.NewSectionReader(fdReader(fd), 0, 1<<62)
	if _, err := io.Copy(h, r); err != nil {
		return fmt.Errorf("hash the entry: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return errors.New(checksumMismatch + got)
	}
	return nil
}

// fdReader reads a descriptor at an offset without moving it.
type fdReader int

func (fd fdReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := unix.Pread(int(fd), p, off)
	if n == 0 && err == nil && len(p) > 0 {
		return 0, io.EOF
	}
	return n, err
}

// execFD execs the open file fd, the way fexecve(3) does, so that no path
// is resolved after the host's checks.
func execFD(fd int, argv, env []string) error {
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	empty, err := syscall.BytePtrFromString("")
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	_, _, errno := syscall.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])), unix.AT_EMPTY_PATH, 0)
	return fmt.Errorf("exec %s: %w", argv[0], errno)
}
