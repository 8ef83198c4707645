package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Landlock access rights the launcher grants.
const (
	accessRead     = ll.AccessFSReadFile | ll.AccessFSReadDir
	accessReadExec = accessRead | ll.AccessFSExecute
	// accessReadWrite is what a process may do in its own directories:
	// everything but executing what it wrote, making device nodes, and
	// moving files in from elsewhere.
	accessReadWrite = accessRead | ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo |
		ll.AccessFSMakeSym | ll.AccessFSTruncate
	// accessFile are the rights that apply to a file rather than a
	// directory; a rule on a file may grant only these.
	accessFile = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// landlockABI is the Landlock version the launcher's ruleset is written
// for: filesystem rights through ioctl on devices (V5), TCP bind and
// connect (V4), and the signal and abstract socket scopes (V6). A newer
// kernel enforces it as written; an older one enforces what it knows
// (best effort), and Probe says what that is.
func landlockConfig(network string) landlock.Config {
	cfg := landlock.V7
	if network == networkAll {
		cfg.HandledAccessNet = 0
	}
	return cfg.BestEffort()
}

// applyLandlock restricts the process to the spec's paths: nothing else
// of the filesystem may be opened, executed or changed.
func applyLandlock(spec *Spec) error {
	var rules []landlock.Rule
	for _, set := range []struct {
		paths  []string
		access landlock.AccessFSSet
	}{
		{spec.ReadExec, accessReadExec},
		{spec.Read, accessRead},
		{spec.ReadWrite, accessReadWrite},
	} {
		for _, p := range set.paths {
			r, err := pathRule(p, set.access)
			if err != nil {
				return err
			}
			if r != nil {
				rules = append(rules, r)
			}
		}
	}
	if spec.Network == networkDNS {
		rules = append(rules, landlock.ConnectTCP(53))
	}
	for _, port := range spec.ConnectPorts {
		rules = append(rules, landlock.ConnectTCP(port))
	}
	if err := landlockConfig(spec.Network).Restrict(rules...); err != nil {
		return fmt.Errorf("apply Landlock: %w", err)
	}
	return nil
}

// pathRule grants access beneath path, only the file rights when path is
// a file. A path that does not exist grants nothing.
func pathRule(path string, access landlock.AccessFSSet) (landlock.Rule, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("Landlock rule for %s: %w", path, err)
	}
	if !fi.IsDir() {
		access &= accessFile
	}
	return landlock.PathAccess(access, path), nil
}
