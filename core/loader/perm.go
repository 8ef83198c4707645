package loader

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WritableError is an executable, or the directory holding it, that every
// user of the machine may write: any of them could replace the code the
// host is about to run with its privileges. The host refuses it unless the
// operator opts out with allow_writable = true.
type WritableError struct {
	// Path is the file or directory at fault.
	Path string
	// Mode is its permission bits.
	Mode fs.FileMode
	// Dir is set when Path is the directory holding the executable.
	Dir bool
}

// Error implements error.
func (e *WritableError) Error() string {
	what := "file"
	if e.Dir {
		what = "directory"
	}
	return fmt.Sprintf("%s %s is writable by others (mode %04o), so another user could replace what the host runs; "+
		"fix its permissions (chmod o-w %s) or set allow_writable = true in its block",
		what, e.Path, e.Mode.Perm(), e.Path)
}

// worldWritable is the permission bit that lets every user write. Group
// write is not refused: with per-user private groups (umask 002, the
// default for users on several distributions) every file the operator
// builds is group-writable by the operator alone.
const worldWritable = 0o002

// CheckWritable refuses a file at path (a pack's pack.json) that is
// world-writable, or that sits in a directory which is. A sticky
// directory (such as /tmp) is accepted when the file itself is safe: there
// only the file's owner can rename or remove it. Symbolic links are
// followed, and the directory of the link's target is checked too. The
// binaries the host runs are checked on the open file instead, by
// OpenExecutable and OpenPackEntry.
func CheckWritable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("executable %s: %w", path, err)
	}
	if fi.Mode().Perm()&worldWritable != 0 {
		return &WritableError{Path: path, Mode: fi.Mode()}
	}
	dirs := []string{filepath.Dir(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil && filepath.Dir(real) != dirs[0] {
		dirs = append(dirs, filepath.Dir(real))
	}
	return checkWritableDirs(dirs)
}

// checkWritableDirs refuses the first of dirs that every user may write
// and that is not sticky.
func checkWritableDirs(dirs []string) error {
	for _, d := range dirs {
		di, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("directory %s: %w", d, err)
		}
		if di.Mode().Perm()&worldWritable != 0 && di.Mode()&fs.ModeSticky == 0 {
			return &WritableError{Path: d, Mode: di.Mode(), Dir: true}
		}
	}
	return nil
}
