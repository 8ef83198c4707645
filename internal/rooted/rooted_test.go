package rooted

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestOpenFile(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "dir")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(dir, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for path, content := range map[string]string{
		filepath.Join(dir, "sub", "in"): "inside",
		filepath.Join(outside, "out"):   "outside",
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"link-in":       "sub/in",
		"sub/up-in":     "../sub/in",
		"dir-in":        "sub",
		"link-out":      "../outside/out",
		"abs-out":       filepath.Join(outside, "out"),
		"abs-in":        filepath.Join(dir, "sub", "in"),
		"dir-out":       outside,
		"chain-out":     "link-out",
		"dangling-out":  "../outside/absent",
		"dangling-in":   "sub/absent",
		"sub/climb-out": "../../outside/out",
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"sub/in", "link-in", "sub/up-in", "dir-in/in", "./sub/in"} {
		f, err := OpenFile(dir, name, os.O_RDONLY)
		if err != nil {
			t.Errorf("OpenFile(%s): %v", name, err)
			continue
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != "inside" {
			t.Errorf("OpenFile(%s) read %q", name, b)
		}
	}
	for _, name := range []string{"link-out", "abs-out", "abs-in", "dir-out/out", "chain-out", "dangling-out", "sub/climb-out", "../outside/out"} {
		f, err := OpenFile(dir, name, os.O_RDONLY)
		if err == nil {
			f.Close()
			t.Errorf("OpenFile(%s) opened a file through a link that leaves the directory", name)
			continue
		}
		var oe *OutsideError
		if !errors.As(err, &oe) || oe.Dir != dir || oe.Path != filepath.Join(dir, name) {
			t.Errorf("OpenFile(%s): %v (%T), want an *OutsideError naming it", name, err, err)
		}
	}
	for _, name := range []string{"absent", "dangling-in"} {
		_, err := OpenFile(dir, name, os.O_RDONLY)
		var oe *OutsideError
		if !errors.Is(err, fs.ErrNotExist) || errors.As(err, &oe) {
			t.Errorf("OpenFile(%s): %v, want a not-exist error", name, err)
		}
	}
}

// os.Root's refusal is recognised by its words; this fails when Go words
// it otherwise.
func TestEscapeIsRecognised(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	_, err = root.Open("../x")
	if !escapes(err) {
		t.Fatalf("os.Root's refusal %q is not recognised (want its error to read %q)", err, escapeText)
	}
}
