// Package testbin builds the repository's binaries and lays out pack
// directories for the tests and benchmarks that drive the real host.
package testbin

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// SourceDir returns a path inside the repository.
func SourceDir(rel string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", rel)
}

// Build runs `go build -o OUT PKG` from the repository root for each
// output path and package in builds.
//
// Under -race the host (HostPackage) is built with the race detector as
// well (see Main for what makes it fail at the first race).
func Build(builds map[string]string) error {
	for out, pkg := range builds {
		args := []string{"build", "-o", out}
		if raceDetector && pkg == HostPackage {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Dir = SourceDir("")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
		}
	}
	return nil
}

// LayOutPack makes dst a pack directory: the pack.json of the source pack
// at srcRel (relative to the repository) and binary copied to the path its
// runtime.entry names. The host checks the binary's embedded pack.json
// against the file, so the file must be the one the binary was built from.
func LayOutPack(srcRel, binary, dst string) error {
	manifest, err := os.ReadFile(filepath.Join(SourceDir(srcRel), "pack.json"))
	if err != nil {
		return err
	}
	var m struct {
		Runtime struct {
			Entry string `json:"entry"`
		} `json:"runtime"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		return fmt.Errorf("%s/pack.json: %w", srcRel, err)
	}
	entry := filepath.Join(dst, filepath.FromSlash(m.Runtime.Entry))
	if err := os.MkdirAll(filepath.Dir(entry), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dst, "pack.json"), manifest, 0o644); err != nil {
		return err
	}
	exe, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	return os.WriteFile(entry, exe, 0o755)
}

// HostPackage is the host's main package.
const HostPackage = "./cmd/host"

// raceSettings make a race-detector build exit at its first data race
// (status 66), so that a test driving it sees the race as a failure rather
// than a report at exit nobody reads.
const raceSettings = "halt_on_error=1 exitcode=66"
