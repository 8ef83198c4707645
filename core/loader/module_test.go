package loader

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A module is read whole when it is a regular file inside the pack that
// only its owner may write; its digest pin is checked on the bytes read,
// and every other case is refused, naming the module.
func TestReadPackModule(t *testing.T) {
	module := []byte("\x00asm\x01\x00\x00\x00")
	sum := sha256.Sum256(module)
	pin := hex.EncodeToString(sum[:])
	layout := func(t *testing.T, mode os.FileMode) string {
		dir := filepath.Join(t.TempDir(), "pack")
		if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bin", "p.wasm"), module, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, "bin", "p.wasm"), mode); err != nil {
			t.Fatal(err)
		}
		return dir
	}

	dir := layout(t, 0o644)
	got, err := ReadPackModule(dir, "bin/p.wasm", Checks{SHA256: pin})
	if err != nil || string(got) != string(module) {
		t.Fatalf("read: %q, %v", got, err)
	}
	// One hex digit off.
	wrong := pin[:63] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", pin[63])+1)%16])
	_, err = ReadPackModule(dir, "bin/p.wasm", Checks{SHA256: wrong})
	var ce *ChecksumError
	if !errors.As(err, &ce) || ce.Actual != pin || ce.Expected != wrong {
		t.Errorf("wrong pin: %v", err)
	}
	if _, err := ReadPackModule(dir, "bin/q.wasm", Checks{}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing module: %v", err)
	}
	if err := os.Symlink(filepath.Join(t.TempDir(), "elsewhere.wasm"), filepath.Join(dir, "out.wasm")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPackModule(dir, "out.wasm", Checks{}); err == nil || !strings.Contains(err.Error(), "outside the pack directory") {
		t.Errorf("link out of the pack: %v", err)
	}
	if _, err := ReadPackModule(dir, "bin", Checks{}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}

	open := layout(t, 0o646)
	var we *WritableError
	if _, err := ReadPackModule(open, "bin/p.wasm", Checks{}); !errors.As(err, &we) {
		t.Errorf("a module others may write: %v", err)
	}
	if _, err := ReadPackModule(open, "bin/p.wasm", Checks{AllowWritable: true}); err != nil {
		t.Errorf("allow_writable: %v", err)
	}
}
