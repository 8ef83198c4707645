package loader

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// A binary that no longer matches its sum when go-plugin hashes it again
// just before exec (it was rewritten after the host's check) fails with a
// ChecksumError naming both sums, not go-plugin's "checksums did not
// match", and is never run.
func TestChecksumMismatchAtExecNamesBothSums(t *testing.T) {
	dir := t.TempDir()
	marker := dir + "/ran"
	content := []byte("#!/bin/sh\ntouch " + marker + "\n")
	exe := writeFile(t, dir, "plugin", content, 0o755)
	actual := sha256.Sum256(content)
	pinned := sha256.Sum256([]byte("the binary the operator pinned"))

	opened, err := OpenExecutable(exe, Checks{AllowWritable: true})
	if err != nil {
		t.Fatal(err)
	}
	// As if the file had been rewritten in place after the host checked
	// it: the sum go-plugin computes just before exec differs.
	opened.sum = pinned[:]
	opts := Options{Logger: hclog.NewNullLogger(), LogLevel: hclog.Off, MaxMessageBytes: 1 << 20, StartTimeout: 5 * time.Second}
	_, err = StartCapability("pinned", opened, opts)
	var ce *ChecksumError
	if !errors.As(err, &ce) {
		t.Fatalf("start of a changed binary: %v (%T), want a *ChecksumError", err, err)
	}
	want := ChecksumError{Path: exe, Expected: hex.EncodeToString(pinned[:]), Actual: hex.EncodeToString(actual[:]), AtExec: true}
	if *ce != want {
		t.Errorf("ChecksumError = %+v, want %+v", *ce, want)
	}
	for _, s := range []string{"expected " + want.Expected, "actual " + want.Actual, "just before exec"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the binary ran although its sum did not match")
	}
}
