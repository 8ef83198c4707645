package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wophost/wophost/internal/goproxy"
)

// The command writes the module of -subdir at HEAD into -out and prints
// its version and go.sum lines, or with -json the result; a bad flag or
// argument is a usage error, a failed build exit 1 with the reason.
func TestRun(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	repo := t.TempDir()
	for _, f := range []struct{ name, text string }{{"mod/go.mod", "module example.com/mod\n\ngo 1.26.0\n"}, {"mod/mod.go", "package mod\n"}} {
		p := filepath.Join(repo, f.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "first"}, {"tag", "mod/v1.2.3"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=A", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=A", "GIT_COMMITTER_EMAIL=a@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	out := filepath.Join(t.TempDir(), "proxy")

	var stdout, stderr bytes.Buffer
	if code := run([]string{"-repo", repo, "-subdir", "mod", "-out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "wrote example.com/mod v1.2.3 in "+out) || !strings.Contains(stdout.String(), "tag mod/v1.2.3") ||
		!strings.Contains(stdout.String(), "\n  example.com/mod v1.2.3 h1:") || !strings.Contains(stdout.String(), "\n  example.com/mod v1.2.3/go.mod h1:") {
		t.Errorf("output:\n%s", stdout.String())
	}

	stdout.Reset()
	if code := run([]string{"-repo", repo, "-subdir", "mod", "-out", out, "-json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("-json: exit %d\n%s", code, stderr.String())
	}
	var res goproxy.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.Version != "v1.2.3" || !res.Existed {
		t.Errorf("-json: %+v, %v\n%s", res, err, stdout.String())
	}

	stderr.Reset()
	if code := run([]string{"-repo", repo, "-out", out, "extra"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `unexpected argument "extra"`) {
		t.Errorf("an argument: exit %d\n%s", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"-repo", repo, "-subdir", "mod", "-out", out, "-version", "1.0"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "not a canonical semantic version") {
		t.Errorf("a bad version: exit %d\n%s", code, stderr.String())
	}
}
