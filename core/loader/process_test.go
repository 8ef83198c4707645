package loader

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, dir, name string, content []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, content, mode); err != nil {
		t.Fatal(err)
	}
	// WriteFile's mode is filtered by the umask; set it exactly.
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVerify(t *testing.T) {
	dir := t.TempDir()
	content := []byte("#!/bin/sh\necho plugin\n")
	sum := sha256.Sum256(content)
	pin := hex.EncodeToString(sum[:])
	otherSum := sha256.Sum256([]byte("something else"))
	otherPin := hex.EncodeToString(otherSum[:])

	exe := writeFile(t, dir, "plugin", content, 0o755)
	ownerOnly := writeFile(t, dir, "owner-only", content, 0o700)
	groupOnly := writeFile(t, dir, "group-only", content, 0o610)
	plain := writeFile(t, dir, "plain", content, 0o644)
	subdir := filepath.Join(dir, "subdir")
	if err := os.Mkdir(subdir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")

	tests := []struct {
		name    string
		path    string
		pin     string
		wantSum []byte
		errHas  []string // substrings of the error; nil for success
	}{
		{name: "missing file", path: missing, errHas: []string{missing, "does not exist"}},
		{name: "missing file with pin", path: missing, pin: pin, errHas: []string{"does not exist"}},
		{name: "directory", path: subdir, errHas: []string{subdir, "not a regular file"}},
		{name: "not executable", path: plain, errHas: []string{plain, "not executable", "-rw-r--r--"}},
		{name: "not executable with matching pin", path: plain, pin: pin, errHas: []string{"not executable"}},
		{name: "no pin", path: exe, wantSum: nil},
		{name: "owner executable", path: ownerOnly, wantSum: nil},
		{name: "group executable", path: groupOnly, pin: pin, wantSum: sum[:]},
		{name: "pin match", path: exe, pin: pin, wantSum: sum[:]},
		{name: "symlink to executable", path: link, pin: pin, wantSum: sum[:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Verify(tt.path, tt.pin)
			if tt.errHas != nil {
				if err == nil {
					t.Fatalf("Verify(%s) succeeded, want an error", tt.path)
				}
				for _, s := range tt.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				if got != nil {
					t.Errorf("sum = %x, want nil on error", got)
				}
				var ce *ChecksumError
				if errors.As(err, &ce) {
					t.Errorf("error is a *ChecksumError: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify(%s): %v", tt.path, err)
			}
			if !bytes.Equal(got, tt.wantSum) {
				t.Errorf("sum = %x, want %x", got, tt.wantSum)
			}
		})
	}

	t.Run("pin mismatch", func(t *testing.T) {
		got, err := Verify(exe, otherPin)
		if got != nil {
			t.Errorf("sum = %x, want nil", got)
		}
		var ce *ChecksumError
		if !errors.As(err, &ce) {
			t.Fatalf("error %v (%T) is not a *ChecksumError", err, err)
		}
		if ce.Path != exe || ce.Expected != otherPin || ce.Actual != pin {
			t.Errorf("ChecksumError = %+v", ce)
		}
		msg := err.Error()
		for _, s := range []string{exe, "expected " + otherPin, "actual " + pin} {
			if !strings.Contains(msg, s) {
				t.Errorf("message %q does not contain %q", msg, s)
			}
		}
		// Wrapped in a phase error, it is still found.
		if !errors.As(&PhaseError{Phase: "verified", Err: err}, &ce) {
			t.Error("ChecksumError not found through PhaseError")
		}
	})

	t.Run("empty file", func(t *testing.T) {
		empty := writeFile(t, dir, "empty", nil, 0o755)
		emptySum := sha256.Sum256(nil)
		got, err := Verify(empty, hex.EncodeToString(emptySum[:]))
		if err != nil || !bytes.Equal(got, emptySum[:]) {
			t.Fatalf("Verify(empty) = %x, %v", got, err)
		}
	})
}

func TestPhaseError(t *testing.T) {
	cause := errors.New("handshake failed")
	err := &PhaseError{Phase: "started", Err: cause}
	if got := err.Error(); got != "started: handshake failed" {
		t.Errorf("Error() = %q", got)
	}
	if !errors.Is(err, cause) {
		t.Error("errors.Is does not reach the cause")
	}
}
