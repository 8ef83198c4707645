package loader

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/wophost/wophost/internal/rooted"
)

// Checks are what opening a binary verifies beyond "a regular file that
// may be executed".
type Checks struct {
	// SHA256 is the lowercase hex digest the binary must have, or "".
	SHA256 string
	// AllowWritable accepts a binary, or a directory holding it, that
	// every user may write; by default it is refused (see WritableError).
	AllowWritable bool
}

// Executable is a plugin or pack binary opened once. Every check runs on
// the open file, and the process is started from that same file (on
// Linux through /proc, see execPath), so what runs is what was checked:
// replacing the path, or a symbolic link on it, after the check changes
// nothing. An Executable is handed to StartCapability or StartPack, which
// close it once the process has started; Close it yourself otherwise.
type Executable struct {
	// path is the binary's path as named: the process's argv[0], and its
	// directory the process's working directory.
	path string
	file *os.File
	info fs.FileInfo
	// sum is the binary's sha256 when a pin was checked.
	sum []byte
}

// OpenExecutable opens the binary at path, an operator-chosen path
// (absolute, or in plugin_dir): symbolic links are followed wherever they
// lead, and the checks apply to the file they lead to.
func OpenExecutable(path string, checks Checks) (*Executable, error) {
	f, err := openNonBlocking(func(flag int) (*os.File, error) { return os.OpenFile(path, flag, 0) })
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("binary %s does not exist", path)
		}
		return nil, fmt.Errorf("open binary %s: %w", path, err)
	}
	return checked(path, f, checks)
}

// OpenPackEntry opens the pack's entry binary, entry being the manifest's
// runtime.entry (slash-separated, relative to dir). No element of the
// path, a symbolic link included, may lead outside the pack directory
// (see package rooted); a relative link that stays inside is followed.
func OpenPackEntry(dir, entry string, checks Checks) (*Executable, error) {
	path, f, err := openInPack(dir, entry, "binary")
	if err != nil {
		return nil, err
	}
	return checked(path, f, checks)
}

// openInPack opens entry inside the pack directory dir for reading; what
// names the file in errors ("binary", "module").
func openInPack(dir, entry, what string) (string, *os.File, error) {
	path := filepath.Join(dir, filepath.FromSlash(entry))
	f, err := openNonBlocking(func(flag int) (*os.File, error) { return rooted.OpenFile(dir, entry, flag) })
	if err != nil {
		var oe *rooted.OutsideError
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return path, nil, fmt.Errorf("%s %s does not exist", what, path)
		case errors.As(err, &oe):
			return path, nil, fmt.Errorf("%s %s leads outside the pack directory %s through a symbolic link; the entry must be a file inside the pack, and a link to it relative", what, path, dir)
		}
		return path, nil, fmt.Errorf("open %s %s inside the pack directory %s: %w", what, path, dir, err)
	}
	return path, f, nil
}

// openNonBlocking opens a file for reading without blocking on a FIFO,
// whose open would wait for a writer: what is opened is checked to be a
// regular file afterwards, on the open file.
func openNonBlocking(open func(flag int) (*os.File, error)) (*os.File, error) {
	return open(os.O_RDONLY | syscall.O_NONBLOCK)
}

// checked runs every check on the open file f, named path, and returns it
// as an Executable; f is closed when a check fails.
func checked(path string, f *os.File, checks Checks) (_ *Executable, err error) {
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat binary %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("binary %s is not a regular file (mode %s)", path, fi.Mode())
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("binary %s is not executable (mode %s)", path, fi.Mode().Perm())
	}
	if !checks.AllowWritable {
		if err := checkWritableFile(path, f, fi); err != nil {
			return nil, err
		}
	}
	e := &Executable{path: path, file: f, info: fi}
	if err := e.reachable(); err != nil {
		return nil, err
	}
	if checks.SHA256 == "" {
		return e, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, fi.Size())); err != nil {
		return nil, fmt.Errorf("hash binary %s: %w", path, err)
	}
	sum := h.Sum(nil)
	if actual := hex.EncodeToString(sum); actual != checks.SHA256 {
		return nil, &ChecksumError{Path: path, Expected: checks.SHA256, Actual: actual}
	}
	e.sum = sum
	return e, nil
}

// checkWritableFile refuses the open file f (named path) when every user
// may write it, or the directory it was named in, or the directory it
// actually lies in: any of them could change what the host runs next.
func checkWritableFile(path string, f *os.File, fi fs.FileInfo) error {
	if fi.Mode().Perm()&worldWritable != 0 {
		return &WritableError{Path: path, Mode: fi.Mode()}
	}
	dirs := []string{filepath.Dir(path)}
	if real, err := openedPath(f, path); err == nil && filepath.Dir(real) != dirs[0] {
		dirs = append(dirs, filepath.Dir(real))
	}
	return checkWritableDirs(dirs)
}

// Path returns the binary's path as named.
func (e *Executable) Path() string { return e.path }

// Sum returns the binary's sha256 when a pin was checked, else nil.
func (e *Executable) Sum() []byte { return e.sum }

// Identity is FileIdentity of the open file: a reload compares it with
// the identity of the path then to tell whether the binary changed.
func (e *Executable) Identity() string {
	st, ok := e.info.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return statIdentity(st)
}

// Close releases the open file.
func (e *Executable) Close() error { return e.file.Close() }
