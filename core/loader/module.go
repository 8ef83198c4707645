package loader

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
)

// MaxModuleBytes bounds a WebAssembly pack's module (256 MiB): the host
// reads it whole to compile it.
const MaxModuleBytes = 256 << 20

// ReadPackModule reads a WebAssembly pack's module, entry being the
// manifest's runtime.entry, under the same rules as OpenPackEntry: no
// element of the path may lead outside the pack directory, the file must
// be regular and, unless checks allow it, writable by its owner alone.
// A module need not be executable. The digest pin is checked on the bytes
// returned, which are what the host compiles: a file replaced after the
// read changes nothing.
func ReadPackModule(dir, entry string, checks Checks) ([]byte, error) {
	path, f, err := openInPack(dir, entry, "module")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat module %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("module %s is not a regular file (mode %s)", path, fi.Mode())
	}
	if fi.Size() > MaxModuleBytes {
		return nil, fmt.Errorf("module %s is %d bytes, more than the %d a module may have", path, fi.Size(), MaxModuleBytes)
	}
	if !checks.AllowWritable {
		if err := checkWritableFile(path, f, fi); err != nil {
			return nil, err
		}
	}
	// One byte past the bound tells a file that grew since the stat.
	data, err := io.ReadAll(io.LimitReader(f, MaxModuleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read module %s: %w", path, err)
	}
	if len(data) > MaxModuleBytes {
		return nil, fmt.Errorf("module %s is more than the %d bytes a module may have", path, MaxModuleBytes)
	}
	if checks.SHA256 != "" {
		sum := sha256.Sum256(data)
		if actual := hex.EncodeToString(sum[:]); actual != checks.SHA256 {
			return nil, &ChecksumError{Path: path, Expected: checks.SHA256, Actual: actual}
		}
	}
	return data, nil
}
