package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func openTestStore(t *testing.T, path string) *store {
	t.Helper()
	s, err := openStore(path)
	if err != nil {
		t.Fatalf("openStore(%s): %v", path, err)
	}
	return s
}

func mustGet(t *testing.T, s *store, key, wantValue string, wantVersion uint64) {
	t.Helper()
	v, version, err := s.get(key)
	if err != nil {
		t.Fatalf("get(%q): %v", key, err)
	}
	if v != wantValue || version != wantVersion {
		t.Fatalf("get(%q) = %q, v%d; want %q, v%d", key, v, version, wantValue, wantVersion)
	}
}

func mustPut(t *testing.T, s *store, key, value string, wantVersion uint64) {
	t.Helper()
	version, err := s.put(key, value)
	if err != nil {
		t.Fatalf("put(%q): %v", key, err)
	}
	if version != wantVersion {
		t.Fatalf("put(%q) version = %d, want %d", key, version, wantVersion)
	}
}

func mustNotFound(t *testing.T, s *store, key string) {
	t.Helper()
	v, version, err := s.get(key)
	if !errors.Is(err, errNotFound) {
		t.Fatalf("get(%q) = %q, v%d, %v; want errNotFound", key, v, version, err)
	}
}

func TestStorePutGetDelete(t *testing.T) {
	// openStore creates missing parent directories.
	path := filepath.Join(t.TempDir(), "state", "nested", "kv.db")
	s := openTestStore(t, path)
	defer s.close()

	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("store directory: %v, %v; want mode 0700", fi, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("store file: %v, %v; want mode 0600", fi, err)
	}

	mustNotFound(t, s, "a")

	// Each put bumps the key's version; keys are independent.
	mustPut(t, s, "a", "one", 1)
	mustGet(t, s, "a", "one", 1)
	mustPut(t, s, "a", "two", 2)
	mustPut(t, s, "a", "three", 3)
	mustGet(t, s, "a", "three", 3)
	mustPut(t, s, "b", "x", 1)
	mustGet(t, s, "b", "x", 1)
	mustGet(t, s, "a", "three", 3)

	// Unicode keys and values are kept byte for byte.
	mustPut(t, s, "clé/ü", "välue ✓\x00end", 1)
	mustGet(t, s, "clé/ü", "välue ✓\x00end", 1)

	// Delete reports whether the key existed.
	existed, err := s.delete("a")
	if err != nil || !existed {
		t.Fatalf("delete(a) = %v, %v; want true", existed, err)
	}
	mustNotFound(t, s, "a")
	existed, err = s.delete("a")
	if err != nil || existed {
		t.Fatalf("second delete(a) = %v, %v; want false", existed, err)
	}
	existed, err = s.delete("never")
	if err != nil || existed {
		t.Fatalf("delete(never) = %v, %v; want false", existed, err)
	}
	mustGet(t, s, "b", "x", 1)

	// A deleted key starts over at version 1.
	mustPut(t, s, "a", "again", 1)
	mustGet(t, s, "a", "again", 1)
}

func TestStoreReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.db")
	s := openTestStore(t, path)
	mustPut(t, s, "k", "v1", 1)
	mustPut(t, s, "k", "v2", 2)
	mustPut(t, s, "gone", "x", 1)
	if _, err := s.delete("gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	s = openTestStore(t, path)
	defer s.close()
	mustGet(t, s, "k", "v2", 2)
	mustNotFound(t, s, "gone")
	mustPut(t, s, "k", "v3", 3)
	mustGet(t, s, "k", "v3", 3)
}

func TestOpenStoreErrors(t *testing.T) {
	dir := t.TempDir()
	// The parent "directory" is a file.
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := openStore(filepath.Join(blocker, "kv.db")); err == nil {
		s.close()
		t.Fatal("openStore under a regular file succeeded")
	}
	// The store path is a directory.
	if s, err := openStore(dir); err == nil {
		s.close()
		t.Fatal("openStore on a directory succeeded")
	}
	// The store file is not a bbolt database.
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := openStore(junk); err == nil {
		s.close()
		t.Fatal("openStore on a non-database file succeeded")
	}
}

func TestVersionEncoding(t *testing.T) {
	for _, v := range []uint64{0, 1, 255, 256, 1 << 40, ^uint64(0)} {
		b := encodeVersion(v)
		if len(b) != 8 {
			t.Fatalf("encodeVersion(%d) is %d bytes", v, len(b))
		}
		if got := decodeVersion(b); got != v {
			t.Errorf("decodeVersion(encodeVersion(%d)) = %d", v, got)
		}
	}
	for _, b := range [][]byte{nil, {}, {1}, make([]byte, 7), make([]byte, 9)} {
		if got := decodeVersion(b); got != 0 {
			t.Errorf("decodeVersion(%v) = %d, want 0", b, got)
		}
	}
}
