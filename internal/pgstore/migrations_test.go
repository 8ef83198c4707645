package pgstore_test

import (
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/wophost/wophost/internal/pgstore"
)

// MigrationsDir gives the files under "migrations", named as Open reads
// them.
func TestMigrationsDir(t *testing.T) {
	files := fstest.MapFS{
		"migrations/001_create.sql": {Data: []byte("CREATE TABLE t (x int);")},
		"other.txt":                 {Data: []byte("x")},
	}
	got, err := fs.ReadFile(pgstore.MigrationsDir(files), "001_create.sql")
	if err != nil || string(got) != "CREATE TABLE t (x int);" {
		t.Fatalf("001_create.sql = %q, %v", got, err)
	}
	if _, err := fs.Stat(pgstore.MigrationsDir(files), "other.txt"); err == nil {
		t.Error("a file outside migrations is visible")
	}
}
