package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readLockMap reads the lock map alone, none when there is no key, and
// names the key when its value is not a map of strings.
func TestReadLockMap(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) string {
		path := filepath.Join(dir, "pack.json")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	lock, err := readLockMap(write(`{"name":"x","x-wophost-prompts":{"a":"a@1"},"prompts":{"b":"b@1"}}`))
	if err != nil || len(lock) != 1 || lock["a"] != "a@1" {
		t.Errorf("lock map = %v, %v; want a = a@1 only", lock, err)
	}
	if lock, err := readLockMap(write(`{"name":"x"}`)); err != nil || lock != nil {
		t.Errorf("no lock map = %v, %v", lock, err)
	}
	if _, err := readLockMap(write(`{"x-wophost-prompts":{"a":1}}`)); err == nil || !strings.Contains(err.Error(), "x-wophost-prompts") {
		t.Errorf("a number in the lock map: %v, want an error naming x-wophost-prompts", err)
	}
	if _, err := readLockMap(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing pack.json read without an error")
	}
}
