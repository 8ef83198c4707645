package pgstore

import "io/fs"

// MigrationsDir returns the directory "migrations" of files, where a
// store embeds its numbered migrations (//go:embed migrations/*.sql), as
// the fs.FS Open reads them from.
func MigrationsDir(files fs.FS) fs.FS {
	sub, err := fs.Sub(files, "migrations")
	if err != nil {
		panic(err) // fs.Sub fails only on an invalid path, and this one is valid
	}
	return sub
}
