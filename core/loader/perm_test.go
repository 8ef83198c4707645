package loader

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeExec(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The umask would otherwise decide the mode under test.
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestCheckWritable(t *testing.T) {
	tests := []struct {
		name      string
		fileMode  os.FileMode
		dirMode   os.FileMode
		wantPath  string // "file", "dir" or "" for accepted
		wantWords string
	}{
		{"private", 0o755, 0o755, "", ""},
		{"owner only", 0o700, 0o700, "", ""},
		{"group writable file (private groups)", 0o775, 0o755, "", ""},
		{"world writable file", 0o757, 0o755, "file", "others (mode 0757)"},
		{"both", 0o777, 0o755, "file", "others (mode 0777)"},
		{"group writable dir (private groups)", 0o755, 0o775, "", ""},
		{"world writable dir", 0o755, 0o777, "dir", "others"},
		{"sticky world writable dir", 0o755, 0o777 | os.ModeSticky, "", ""},
		{"sticky dir, writable file", 0o777, 0o777 | os.ModeSticky, "file", "0777"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "plugins")
			bin := filepath.Join(dir, "p")
			writeExec(t, bin, tt.fileMode)
			chmod(t, dir, tt.dirMode)
			t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
			err := CheckWritable(bin)
			if tt.wantPath == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var we *WritableError
			if !errors.As(err, &we) {
				t.Fatalf("err %v (%T), want *WritableError", err, err)
			}
			wantPath := bin
			if tt.wantPath == "dir" {
				wantPath = dir
			}
			if we.Path != wantPath || we.Dir != (tt.wantPath == "dir") {
				t.Errorf("error names %s (dir %v), want %s", we.Path, we.Dir, wantPath)
			}
			msg := err.Error()
			for _, w := range []string{wantPath, tt.wantWords, "allow_writable = true", "chmod o-w"} {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestCheckWritableFollowsSymlinks(t *testing.T) {
	root := t.TempDir()
	shared := filepath.Join(root, "shared")
	target := filepath.Join(shared, "p")
	writeExec(t, target, 0o755)
	chmod(t, shared, 0o777)
	t.Cleanup(func() { _ = os.Chmod(shared, 0o755) })
	link := filepath.Join(root, "bin", "p")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	var we *WritableError
	if err := CheckWritable(link); !errors.As(err, &we) || we.Path != shared || !we.Dir {
		t.Fatalf("err %v, want the target's writable directory %s", err, shared)
	}
}

func TestCheckWritableMissing(t *testing.T) {
	err := CheckWritable(filepath.Join(t.TempDir(), "absent"))
	var we *WritableError
	if err == nil || errors.As(err, &we) || !strings.Contains(err.Error(), "absent") {
		t.Fatalf("err %v, want a not-exist error naming the path", err)
	}
}
