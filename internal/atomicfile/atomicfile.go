// Package atomicfile replaces files so that readers, and the file system
// after a crash, see the old content or the new, never a part of it.
package atomicfile

import (
	"os"
	"path/filepath"
)

// TempPrefix starts the name of the temporary file a write uses. An
// interrupted write (a killed process) leaves one behind; a directory
// scan recognises it by this prefix.
const TempPrefix = ".tmp-"

// Write replaces path with data, given mode perm: a temporary file in
// path's directory is written, synced and renamed over path, then the
// directory is synced so that the rename itself is durable.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteWithHook(path, data, perm, nil)
}

// WriteWithHook is Write with beforeRename (when not nil) called once the
// data is synced and before it is renamed into place, the last moment a
// crash leaves path untouched; tests use it to interrupt a write there.
func WriteWithHook(path string, data []byte, perm os.FileMode, beforeRename func()) error {
	return WriteWithHooks(path, data, perm, Hooks{BeforeRename: beforeRename})
}

// Hooks are a write's seams for tests.
type Hooks struct {
	// BeforeRename, when not nil, is called once the data is synced and
	// before it is renamed into place.
	BeforeRename func()
	// Synced, when not nil, is told of each sync once it succeeded: the
	// path the data will have (for the temporary file), then the
	// directory whose entry the rename changed. Tests use it to see that
	// a store syncs what it writes before it answers.
	Synced func(path string)
}

// WriteWithHooks is Write with the seams of hooks.
func WriteWithHooks(path string, data []byte, perm os.FileMode, hooks Hooks) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, TempPrefix+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Chmod(perm); err != nil {
		return err
	}
	if err = syncFile(tmp, path, hooks.Synced); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if hooks.BeforeRename != nil {
		hooks.BeforeRename()
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return SyncDirWithHook(dir, hooks.Synced)
}

// syncFile syncs f and then tells synced (when not nil) of it as name.
func syncFile(f *os.File, name string, synced func(string)) error {
	if err := f.Sync(); err != nil {
		return err
	}
	if synced != nil {
		synced(name)
	}
	return nil
}

// SyncDir syncs a directory, making the entries created, renamed or
// removed in it durable.
func SyncDir(dir string) error {
	return SyncDirWithHook(dir, nil)
}

// SyncDirWithHook is SyncDir that then tells synced (when not nil) of dir.
func SyncDirWithHook(dir string, synced func(path string)) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return syncFile(d, dir, synced)
}
