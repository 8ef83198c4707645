package loader

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// openExecutable opens path for a test, with no pin and the default
// permission check.
func openExecutable(t *testing.T, path string) *Executable {
	t.Helper()
	exe, err := OpenExecutable(path, Checks{})
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func pinOf(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

func TestOpenExecutable(t *testing.T) {
	dir := t.TempDir()
	content := []byte("#!/bin/sh\necho plugin\n")
	sum := sha256.Sum256(content)
	pin := pinOf(content)
	otherPin := pinOf([]byte("something else"))

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
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o755); err != nil {
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
		{name: "fifo", path: fifo, errHas: []string{fifo, "not a regular file"}},
		{name: "not executable", path: plain, errHas: []string{plain, "not executable", "-rw-r--r--"}},
		{name: "not executable with matching pin", path: plain, pin: pin, errHas: []string{"not executable"}},
		{name: "no pin", path: exe, wantSum: nil},
		{name: "owner executable", path: ownerOnly, wantSum: nil},
		{name: "group executable", path: groupOnly, pin: pin, wantSum: sum[:]},
		{name: "pin match", path: exe, pin: pin, wantSum: sum[:]},
		// An operator-chosen path may be a link, wherever it leads.
		{name: "symlink to executable", path: link, pin: pin, wantSum: sum[:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := OpenExecutable(tt.path, Checks{SHA256: tt.pin})
			if tt.errHas != nil {
				if err == nil {
					got.Close()
					t.Fatalf("OpenExecutable(%s) succeeded, want an error", tt.path)
				}
				for _, s := range tt.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				var ce *ChecksumError
				if errors.As(err, &ce) {
					t.Errorf("error is a *ChecksumError: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenExecutable(%s): %v", tt.path, err)
			}
			defer got.Close()
			if !bytes.Equal(got.Sum(), tt.wantSum) {
				t.Errorf("sum = %x, want %x", got.Sum(), tt.wantSum)
			}
			if got.Path() != tt.path {
				t.Errorf("Path() = %s, want the path as named, %s", got.Path(), tt.path)
			}
			id, err := FileIdentity(tt.path)
			if err != nil || got.Identity() != id {
				t.Errorf("Identity() = %q, want FileIdentity %q (%v)", got.Identity(), id, err)
			}
		})
	}

	t.Run("pin mismatch", func(t *testing.T) {
		got, err := OpenExecutable(exe, Checks{SHA256: otherPin})
		if got != nil {
			t.Errorf("got an Executable on a mismatch")
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
		got, err := OpenExecutable(empty, Checks{SHA256: pinOf(nil)})
		if err != nil {
			t.Fatalf("OpenExecutable(empty): %v", err)
		}
		defer got.Close()
		if want := sha256.Sum256(nil); !bytes.Equal(got.Sum(), want[:]) {
			t.Fatalf("sum = %x, want %x", got.Sum(), want)
		}
	})
}

// The permission check runs on the opened binary: the file as opened, the
// directory it was named in and the one it lies in.
func TestOpenExecutableRefusesWritable(t *testing.T) {
	tests := []struct {
		name      string
		fileMode  os.FileMode
		dirMode   os.FileMode
		wantPath  string // "file", "dir" or "" for accepted
		wantWords string
	}{
		{"private", 0o755, 0o755, "", ""},
		{"group writable file (private groups)", 0o775, 0o755, "", ""},
		{"world writable file", 0o757, 0o755, "file", "others (mode 0757)"},
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
			exe, err := OpenExecutable(bin, Checks{})
			if tt.wantPath == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				exe.Close()
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
			for _, w := range []string{wantPath, tt.wantWords, "allow_writable = true"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not mention %q", err, w)
				}
			}
			exe, err = OpenExecutable(bin, Checks{AllowWritable: true})
			if err != nil {
				t.Fatalf("with AllowWritable: %v", err)
			}
			exe.Close()
		})
	}

	t.Run("link into a writable directory", func(t *testing.T) {
		root := t.TempDir()
		shared := filepath.Join(root, "shared")
		writeExec(t, filepath.Join(shared, "p"), 0o755)
		chmod(t, shared, 0o777)
		t.Cleanup(func() { _ = os.Chmod(shared, 0o755) })
		link := filepath.Join(root, "bin", "p")
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(shared, "p"), link); err != nil {
			t.Fatal(err)
		}
		var we *WritableError
		if _, err := OpenExecutable(link, Checks{}); !errors.As(err, &we) || we.Path != shared || !we.Dir {
			t.Fatalf("err %v, want the target's writable directory %s", err, shared)
		}
	})
}

// A pack's entry is opened inside the pack directory: a symbolic link that
// stays inside is followed, one that leads outside is refused, however it
// is written.
func TestOpenPackEntry(t *testing.T) {
	base := t.TempDir()
	pack := filepath.Join(base, "pack")
	outside := filepath.Join(base, "outside")
	writeExec(t, filepath.Join(pack, "bin", "real"), 0o755)
	writeExec(t, filepath.Join(outside, "evil"), 0o755)
	links := map[string]string{
		"inside":          "bin/real",
		"bin/sibling":     "real",
		"abs-outside":     filepath.Join(outside, "evil"),
		"rel-outside":     "../outside/evil",
		"dangling":        "../outside/absent",
		"dir-outside":     outside,
		"dir-inside":      "bin",
		"chain-outside":   "abs-outside",
		"inside-absolute": filepath.Join(pack, "bin", "real"),
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(pack, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, entry := range []string{"bin/real", "inside", "bin/sibling", "dir-inside/real", "./bin/real"} {
		t.Run("accepted "+entry, func(t *testing.T) {
			exe, err := OpenPackEntry(pack, entry, Checks{})
			if err != nil {
				t.Fatalf("OpenPackEntry(%s): %v", entry, err)
			}
			defer exe.Close()
			if want := filepath.Join(pack, entry); exe.Path() != want {
				t.Errorf("Path() = %s, want %s", exe.Path(), want)
			}
		})
	}
	// An absolute link is refused even when it names a file inside: a
	// pack that is moved or copied must still mean the same binary.
	for _, entry := range []string{"abs-outside", "rel-outside", "dir-outside/evil", "chain-outside", "dangling", "inside-absolute"} {
		t.Run("refused "+entry, func(t *testing.T) {
			exe, err := OpenPackEntry(pack, entry, Checks{})
			if err == nil {
				exe.Close()
				t.Fatalf("OpenPackEntry(%s) opened a file outside the pack", entry)
			}
			for _, w := range []string{filepath.Join(pack, entry), "outside the pack directory", pack} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		_, err := OpenPackEntry(pack, "bin/absent", Checks{})
		if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), filepath.Join(pack, "bin", "absent")) {
			t.Fatalf("err %v, want a missing binary named", err)
		}
	})
	t.Run("writable", func(t *testing.T) {
		chmod(t, filepath.Join(pack, "bin", "real"), 0o757)
		defer chmod(t, filepath.Join(pack, "bin", "real"), 0o755)
		var we *WritableError
		if _, err := OpenPackEntry(pack, "inside", Checks{}); !errors.As(err, &we) || we.Path != filepath.Join(pack, "inside") {
			t.Fatalf("err %v, want the entry refused as writable", err)
		}
		chmod(t, filepath.Join(pack, "bin"), 0o777)
		defer chmod(t, filepath.Join(pack, "bin"), 0o755)
		chmod(t, filepath.Join(pack, "bin", "real"), 0o755)
		if _, err := OpenPackEntry(pack, "inside", Checks{}); !errors.As(err, &we) || we.Path != filepath.Join(pack, "bin") || !we.Dir {
			t.Fatalf("err %v, want the directory the link leads into refused", err)
		}
		exe, err := OpenPackEntry(pack, "inside", Checks{AllowWritable: true})
		if err != nil {
			t.Fatalf("with AllowWritable: %v", err)
		}
		exe.Close()
	})
}

// What runs is the file that was opened and checked: a binary replaced at
// its path after the checks, before the start, does not run, and
// go-plugin's own checksum check (which hashes the command's path) finds
// the opened file too.
func TestStartRunsTheOpenedFileAfterASwap(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		name := "unpinned"
		if pinned {
			name = "pinned"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "ran")
			// Neither script speaks the handshake: each leaves its name
			// in the marker file and exits, and the start fails.
			script := func(who string) []byte {
				return []byte("#!/bin/sh\necho " + who + " > " + marker + "\n")
			}
			path := writeFile(t, dir, "plugin", script("original"), 0o755)
			checks := Checks{}
			if pinned {
				checks.SHA256 = pinOf(script("original"))
			}
			exe, err := OpenExecutable(path, checks)
			if err != nil {
				t.Fatal(err)
			}
			// The swap: another binary renamed over the path, as an
			// attacker with write access to the directory would.
			swapped := writeFile(t, dir, "swapped", script("swapped"), 0o755)
			if err := os.Rename(swapped, path); err != nil {
				t.Fatal(err)
			}
			var log syncBuffer
			_, err = StartCapability("swap", exe, testOptions(5*time.Second, &log))
			if err == nil {
				t.Fatal("a script without a handshake started")
			}
			if strings.Contains(err.Error(), "checksum") {
				t.Fatalf("go-plugin's checksum check did not find the opened file: %v", err)
			}
			got, rerr := os.ReadFile(marker)
			if rerr != nil {
				t.Fatalf("nothing ran (start error %v): %v\n%s", err, rerr, log.String())
			}
			if strings.TrimSpace(string(got)) != "original" {
				t.Fatalf("the %s binary ran, want the one opened and checked", strings.TrimSpace(string(got)))
			}
		})
	}
}
