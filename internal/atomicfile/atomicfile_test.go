package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o640); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "new" {
		t.Fatalf("content %q, %v; want new", got, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, %v; want 0640", fi.Mode().Perm(), err)
	}
	assertNoTemp(t, filepath.Dir(path))
}

// Until the rename, readers see the old file, and the temporary file
// carries TempPrefix so a scan can recognise it.
func TestWriteWithHookRunsBeforeRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	called := false
	err := WriteWithHook(path, []byte("new"), 0o644, func() {
		called = true
		if got, _ := os.ReadFile(path); string(got) != "old" {
			t.Errorf("before the rename the file reads %q, want old", got)
		}
		entries, _ := os.ReadDir(dir)
		temps := 0
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), TempPrefix) {
				temps++
			}
		}
		if temps != 1 {
			t.Errorf("%d temporary files before the rename, want 1", temps)
		}
	})
	if err != nil || !called {
		t.Fatalf("WriteWithHook: %v, hook called %v", err, called)
	}
	if got, _ := os.ReadFile(path); string(got) != "new" {
		t.Fatalf("after the rename the file reads %q, want new", got)
	}
}

// A failed write removes its temporary file and leaves the old file.
func TestWriteFailureLeavesOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Renaming a file over a non-empty directory fails.
	target := filepath.Join(dir, "d")
	if err := os.MkdirAll(filepath.Join(target, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(target, []byte("new"), 0o644); err == nil {
		t.Fatal("Write over a non-empty directory succeeded")
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Fatalf("the other file reads %q", got)
	}
	assertNoTemp(t, dir)
}

func TestWriteMissingDir(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "no", "f"), nil, 0o644); err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), TempPrefix) {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}
