// Package testbin builds the repository's binaries and lays out pack
// directories for the tests and benchmarks that drive the real host.
package testbin

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
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
		if err := BuildWithFlags(out, pkg); err != nil {
			return err
		}
	}
	return nil
}

// BuildWithFlags builds pkg into out as Build does, with the go build
// flags given added, such as "-ldflags=-X main.sdkVersion=v0.1.0".
func BuildWithFlags(out, pkg string, flags ...string) error {
	// As `make build` does: static binaries, without cgo, except under
	// the race detector, which needs it.
	args, cgo := append([]string{"build", "-o", out}, flags...), "0"
	if raceDetector && pkg == HostPackage {
		args, cgo = append(args, "-race"), "1"
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = SourceDir("")
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
	}
	return nil
}

// BuildWasm builds pkg into out as a WebAssembly pack's module, as `make
// build` does: a wasip1 reactor.
func BuildWasm(out, pkg string) error {
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, pkg)
	cmd.Dir = SourceDir("")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for wasip1: %v\n%s", pkg, err, msg)
	}
	return nil
}

// LayOutPack makes dst a pack directory: the pack.json of the source pack
// at srcRel (relative to the repository), the schema files its nodes
// reference with every file beside them in their directories (where the
// files their $refs name sit), and binary copied to the path its
// runtime.entry names. The
// host checks the binary's embedded pack.json against the file, so the
// file must be the one the binary was built from; the schema files it
// reads from the directory.
func LayOutPack(srcRel, binary, dst string) error {
	src := SourceDir(srcRel)
	manifest, err := os.ReadFile(filepath.Join(src, "pack.json"))
	if err != nil {
		return err
	}
	var m struct {
		Runtime struct {
			Entry string `json:"entry"`
		} `json:"runtime"`
		Nodes []struct {
			Config string `json:"configSchemaRef"`
			Input  string `json:"inputSchemaRef"`
			Output string `json:"outputSchemaRef"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		return fmt.Errorf("%s/pack.json: %w", srcRel, err)
	}
	for _, n := range m.Nodes {
		for _, ref := range []string{n.Config, n.Input, n.Output} {
			if ref == "" {
				continue
			}
			if err := copyFile(filepath.Join(src, filepath.FromSlash(ref)), filepath.Join(dst, filepath.FromSlash(ref)), 0o644); err != nil {
				return fmt.Errorf("%s/pack.json names a schema file: %w", srcRel, err)
			}
			// A schema at the top sits beside the sources: it is copied
			// alone.
			if dir := path.Dir(path.Clean(ref)); dir != "." {
				if err := copyDir(filepath.Join(src, filepath.FromSlash(dir)), filepath.Join(dst, filepath.FromSlash(dir))); err != nil {
					return fmt.Errorf("%s: the directory of a schema file: %w", srcRel, err)
				}
			}
		}
	}
	if err := copyFile(binary, filepath.Join(dst, filepath.FromSlash(m.Runtime.Entry)), 0o755); err != nil {
		return err
	}
	// pack.json last: Cache.Pack takes its presence for a complete layout.
	return os.WriteFile(filepath.Join(dst, "pack.json"), manifest, 0o644)
}

// copyDir copies the regular files under src to dst, keeping their
// paths.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		return copyFile(p, filepath.Join(dst, rel), 0o644)
	})
}

// copyFile copies src to dst as CopyFile does, with the permission bits
// mode.
func copyFile(src, dst string, mode os.FileMode) error {
	if err := CopyFile(src, dst); err != nil {
		return err
	}
	return os.Chmod(dst, mode)
}

// HostPackage is the host's main package.
const HostPackage = "./cmd/host"

// raceSettings make a race-detector build exit at its first data race
// (status 66), so that a test driving it sees the race as a failure rather
// than a report at exit nobody reads.
const raceSettings = "halt_on_error=1 exitcode=66"
