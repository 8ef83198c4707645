// Package rooted opens a file inside a directory so that no element of
// its path, a symbolic link included, leads outside the directory: a pack
// entry inside its pack, a file() inside the config's directory. It rests
// on os.Root, which resolves each element as it opens it, so that what is
// checked is what is opened; a link that stays inside is followed.
package rooted

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// OutsideError is a path that leads outside its directory through a
// symbolic link, or through an absolute one, which os.Root never follows.
type OutsideError struct {
	// Dir is the directory the path must stay in; Path is the path as
	// named, Dir joined with the relative name.
	Dir, Path string
	// Err is os.Root's refusal.
	Err error
}

// Error implements error.
func (e *OutsideError) Error() string {
	return fmt.Sprintf("%s leads outside %s through a symbolic link (a link must be relative and stay inside)", e.Path, e.Dir)
}

// Unwrap returns os.Root's refusal.
func (e *OutsideError) Unwrap() error { return e.Err }

// OpenFile opens name, a relative slash- or OS-separated path, inside dir
// with flag (os.O_RDONLY and the like). A path that leads outside dir is
// refused with an *OutsideError; a missing file with an error matching
// fs.ErrNotExist.
func OpenFile(dir, name string, flag int) (*os.File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.OpenFile(filepath.FromSlash(name), flag, 0)
	if err != nil && escapes(err) {
		return nil, &OutsideError{Dir: dir, Path: filepath.Join(dir, filepath.FromSlash(name)), Err: err}
	}
	return f, err
}

// escapeText is how os.Root words a path that escapes it. The error value
// itself is not exported; TestEscapeIsRecognised notices a change of
// words, which would only make the messages plainer: the refusal is
// os.Root's either way.
const escapeText = "path escapes from parent"

// escapes reports whether err is os.Root's refusal of a path that leads
// outside it.
func escapes(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == escapeText
}
