package host

import (
	"embed"
	"errors"
	"io/fs"
	"slices"
	"strings"

	"github.com/wophost/wophost/core/idempotency"
	"github.com/wophost/wophost/internal/pgstore"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// hostMigrations is the migrations of the host's schema: the idempotency
// store's (001) and then the host's own (002 on), one numbered sequence,
// as pgstore.Open applies one sequence per schema.
func hostMigrations() fs.FS {
	return unionFS{idempotency.Migrations(), pgstore.MigrationsDir(migrationFiles)}
}

// unionFS shows the files of several file systems as one; a name is read
// from the first that has it. Directories list the entries of all.
type unionFS []fs.FS

// Open implements fs.FS.
func (u unionFS) Open(name string) (fs.File, error) {
	var first error
	for _, f := range u {
		file, err := f.Open(name)
		if err == nil {
			return file, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// Stat implements fs.StatFS.
func (u unionFS) Stat(name string) (fs.FileInfo, error) {
	var first error
	for _, f := range u {
		fi, err := fs.Stat(f, name)
		if err == nil {
			return fi, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// ReadDir implements fs.ReadDirFS.
func (u unionFS) ReadDir(name string) ([]fs.DirEntry, error) {
	var out []fs.DirEntry
	found := false
	for _, f := range u {
		entries, err := fs.ReadDir(f, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		found = true
		for _, e := range entries {
			if !slices.ContainsFunc(out, func(o fs.DirEntry) bool { return o.Name() == e.Name() }) {
				out = append(out, e)
			}
		}
	}
	if !found {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}
