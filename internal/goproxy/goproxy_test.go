package goproxy

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

// repo is a git repository made for a test.
type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git: the module is written from a commit")
	}
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	return r
}

// git runs git in the repository under a fixed identity and returns its
// output.
func (r *repo) git(args ...string) string {
	r.t.Helper()
	return r.gitAt("2026-01-02T03:04:05Z", args...)
}

// gitAt is git with the author and committer time at.
func (r *repo) gitAt(at string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=A", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=A",
		"GIT_COMMITTER_EMAIL=a@example.com", "GIT_AUTHOR_DATE="+at, "GIT_COMMITTER_DATE="+at, "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (r *repo) write(rel, text string) {
	r.t.Helper()
	p := filepath.Join(r.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// commit commits everything at time at and returns the commit's hash.
func (r *repo) commit(at string) string {
	r.t.Helper()
	r.gitAt(at, "add", "-A")
	r.gitAt(at, "commit", "-q", "-m", "change")
	return r.git("rev-parse", "HEAD")
}

const kitMod = "module example.com/Acme/Kit\n\ngo 1.26.0\n"

// kitRepo is a repository holding the module example.com/Acme/Kit in
// kit/, beside a file of another module and the repository's LICENSE.
func kitRepo(t *testing.T) *repo {
	r := newRepo(t)
	r.write("LICENSE", "the licence\n")
	r.write("main.go", "package main\n")
	r.write("kit/go.mod", kitMod)
	r.write("kit/kit.go", "package kit\n")
	r.write("kit/sub/sub.go", "package sub\n")
	// A module nested in the module's directory is a module of its own.
	r.write("kit/nested/go.mod", "module example.com/nested\n")
	r.write("kit/nested/nested.go", "package nested\n")
	return r
}

// A version is written under the module path and version case-encoded
// (capitals as "!" and the lowercase letter), as the .info, .mod and
// .zip the GOPROXY protocol names; the zip holds the module's committed
// files (without a nested module's, with the repository's LICENSE) under
// MODULE@VERSION/; the list and @latest name the version.
func TestLayout(t *testing.T) {
	r := kitRepo(t)
	commit := r.commit("2026-03-04T05:06:07Z")
	r.git("tag", "kit/v0.3.0")
	// Not committed: not in the zip, and reported.
	r.write("kit/draft.go", "package kit\n")
	out := filepath.Join(t.TempDir(), "goproxy")

	res, err := Build(Options{Repo: r.dir, Subdir: "kit", Out: out})
	if err != nil {
		t.Fatal(err)
	}
	wantDir := filepath.Join(out, "example.com", "!acme", "!kit", "@v")
	if res.Module != "example.com/Acme/Kit" || res.Version != "v0.3.0" || res.Tag != "kit/v0.3.0" || res.Commit != commit || res.Dir != wantDir || !res.Dirty || res.Existed {
		t.Errorf("result %+v", res)
	}
	if want := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC); !res.Time.Equal(want) {
		t.Errorf("time %v; want the commit's, %v", res.Time, want)
	}

	if got := readFile(t, wantDir, "list"); got != "v0.3.0\n" {
		t.Errorf("list %q", got)
	}
	var inf info
	if err := json.Unmarshal([]byte(readFile(t, wantDir, "v0.3.0.info")), &inf); err != nil {
		t.Fatal(err)
	}
	if inf.Version != "v0.3.0" || !inf.Time.Equal(res.Time) {
		t.Errorf(".info %+v", inf)
	}
	if got := readFile(t, filepath.Dir(wantDir), "@latest"); got != readFile(t, wantDir, "v0.3.0.info") {
		t.Errorf("@latest %q is not the version's .info", got)
	}
	if got := readFile(t, wantDir, "v0.3.0.mod"); got != kitMod {
		t.Errorf(".mod %q", got)
	}

	zipPath := filepath.Join(wantDir, "v0.3.0.zip")
	if _, err := modzip.CheckZip(module.Version{Path: res.Module, Version: res.Version}, zipPath); err != nil {
		t.Errorf("the go command would refuse the zip: %v", err)
	}
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	p := "example.com/Acme/Kit@v0.3.0/"
	if want := []string{p + "LICENSE", p + "go.mod", p + "kit.go", p + "sub/sub.go"}; !slices.Equal(names, want) {
		t.Errorf("zip holds %q; want %q", names, want)
	}
	if sum, err := dirhash.HashZip(zipPath, dirhash.Hash1); err != nil || sum != res.Sum {
		t.Errorf("sum %s; the zip's is %s (%v)", res.Sum, sum, err)
	}
}

// The version of a commit is its highest version tag of the module, else
// a pseudo-version after the highest such tag it descends from, as the go
// command makes it; tags of other modules, other major versions and
// versions that are not canonical are no version of it.
func TestResolve(t *testing.T) {
	r := kitRepo(t)
	first := r.commit("2026-01-02T03:04:05Z")
	resolve := func(commit string) (string, string) {
		t.Helper()
		tm, err := commitTime(r.dir, commit)
		if err != nil {
			t.Fatal(err)
		}
		v, tag, err := Resolve(r.dir, "kit", "example.com/Acme/Kit", commit, tm)
		if err != nil {
			t.Fatal(err)
		}
		return v, tag
	}
	if v, tag := resolve(first); v != "v0.0.0-20260102030405-"+first[:12] || tag != "" {
		t.Errorf("no tag: %s %q", v, tag)
	}

	// None of these is a version of the module at v0 or v1.
	for _, name := range []string{"v9.0.0", "kit/v2.0.0", "kit/v1.0", "kit/vnext", "kit/v1.0.0+meta", "other/v5.0.0"} {
		r.git("tag", name)
	}
	if v, tag := resolve(first); v != "v0.0.0-20260102030405-"+first[:12] || tag != "" {
		t.Errorf("only tags of no version of the module: %s %q", v, tag)
	}

	r.git("tag", "-a", "-m", "release", "kit/v0.2.0")
	r.git("tag", "kit/v0.2.0-rc.1")
	if v, tag := resolve(first); v != "v0.2.0" || tag != "kit/v0.2.0" {
		t.Errorf("tagged (annotated) v0.2.0 and v0.2.0-rc.1: %s %q", v, tag)
	}

	r.write("kit/more.go", "package kit\n")
	second := r.commit("2026-02-03T04:05:06Z")
	if v, tag := resolve(second); v != "v0.2.1-0.20260203040506-"+second[:12] || tag != "" {
		t.Errorf("after v0.2.0: %s %q", v, tag)
	}
}

// A module holding a file the go command would refuse is not written:
// the error names the file, and nothing appears in the proxy directory.
func TestRefusesWhatGoRefuses(t *testing.T) {
	r := kitRepo(t)
	r.write("kit/Kit.go", "package kit\n")
	r.commit("2026-01-02T03:04:05Z")
	out := filepath.Join(t.TempDir(), "goproxy")
	_, err := Build(Options{Repo: r.dir, Subdir: "kit", Out: out})
	var list modzip.FileErrorList
	if !errors.As(err, &list) || !strings.Contains(err.Error(), "kit.go") || !strings.Contains(err.Error(), "case-insensitive file name collision") {
		t.Fatalf("error %v; want the zip refused for the names differing in case", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the proxy directory was made (%v)", err)
	}
}

// A version already written is never changed: the same commit again is
// left as it is, another commit under that version is refused and the
// files stay; a version whose tag is another commit is refused before
// anything is written.
func TestVersionNeverChanges(t *testing.T) {
	r := kitRepo(t)
	first := r.commit("2026-01-02T03:04:05Z")
	out := t.TempDir()
	res, err := Build(Options{Repo: r.dir, Subdir: "kit", Version: "v0.1.0", Out: out})
	if err != nil || res.Commit != first || res.Tag != "" || res.Existed {
		t.Fatalf("v0.1.0 of HEAD: %+v, %v", res, err)
	}
	zipPath := filepath.Join(res.Dir, "v0.1.0.zip")
	before := readFile(t, res.Dir, "v0.1.0.zip")

	again, err := Build(Options{Repo: r.dir, Subdir: "kit", Version: "v0.1.0", Rev: first, Out: out})
	if err != nil || !again.Existed || again.Sum != res.Sum {
		t.Errorf("the same commit again: %+v, %v", again, err)
	}

	r.write("kit/kit.go", "package kit\n\n// Changed.\n")
	second := r.commit("2026-01-03T03:04:05Z")
	_, err = Build(Options{Repo: r.dir, Subdir: "kit", Version: "v0.1.0", Out: out})
	if err == nil || !strings.Contains(err.Error(), "already in") || !strings.Contains(err.Error(), "other content") {
		t.Errorf("another commit as v0.1.0: %v; want it refused", err)
	}
	if readFile(t, res.Dir, "v0.1.0.zip") != before {
		t.Errorf("%s changed", zipPath)
	}

	// The tag names the version's commit: HEAD is not it.
	r.git("tag", "kit/v0.2.0", first)
	_, err = Build(Options{Repo: r.dir, Subdir: "kit", Version: "v0.2.0", Rev: second, Out: out})
	if err == nil || !strings.Contains(err.Error(), "a version names one commit") {
		t.Errorf("v0.2.0 of a commit other than its tag's: %v", err)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, "v0.2.0.info")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("v0.2.0 was written (%v)", err)
	}
	// Without -rev, the version's tag chooses the commit.
	tagged, err := Build(Options{Repo: r.dir, Subdir: "kit", Version: "v0.2.0", Out: out})
	if err != nil || tagged.Commit != first || tagged.Tag != "kit/v0.2.0" {
		t.Errorf("v0.2.0 by its tag: %+v, %v", tagged, err)
	}
}

// The list holds the versions written that are not pseudo-versions, in
// semver order; @latest is the highest version written, pseudo or not.
func TestListAndLatest(t *testing.T) {
	r := kitRepo(t)
	r.commit("2026-01-02T03:04:05Z")
	out := t.TempDir()
	build := func(o Options) *Result {
		t.Helper()
		o.Repo, o.Subdir, o.Out = r.dir, "kit", out
		res, err := Build(o)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	pseudo := build(Options{})
	if !module.IsPseudoVersion(pseudo.Version) {
		t.Fatalf("untagged HEAD as %s", pseudo.Version)
	}
	if got := readFile(t, pseudo.Dir, "list"); got != "" {
		t.Errorf("list with only a pseudo-version: %q", got)
	}
	if got := latest(t, pseudo.Dir); got != pseudo.Version {
		t.Errorf("@latest %s; want the pseudo-version %s", got, pseudo.Version)
	}
	build(Options{Version: "v0.10.0"})
	build(Options{Version: "v0.9.0"})
	build(Options{Version: "v0.10.0-rc.1"})
	if got := readFile(t, pseudo.Dir, "list"); got != "v0.9.0\nv0.10.0-rc.1\nv0.10.0\n" {
		t.Errorf("list %q", got)
	}
	if got := latest(t, pseudo.Dir); got != "v0.10.0" {
		t.Errorf("@latest %s; want v0.10.0", got)
	}
}

// Versions that are not canonical, or not of the module's major version,
// are refused, as is a directory inside a work tree rather than its top.
func TestInvalid(t *testing.T) {
	r := kitRepo(t)
	r.commit("2026-01-02T03:04:05Z")
	out := filepath.Join(t.TempDir(), "goproxy")
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Repo: r.dir, Subdir: "kit", Version: "v1.2"}, "not a canonical semantic version"},
		{Options{Repo: r.dir, Subdir: "kit", Version: "v1.2.0+build"}, "not a canonical semantic version"},
		{Options{Repo: r.dir, Subdir: "kit", Version: "v2.0.0"}, "version v2.0.0"},
		{Options{Repo: r.dir, Subdir: "kit", Rev: "nosuch"}, "nosuch names no commit"},
		{Options{Repo: r.dir, Subdir: "nowhere"}, `the files of "nowhere"`},
		{Options{Repo: r.dir, Subdir: "kit/sub"}, "kit/sub/go.mod: no such file"},
		{Options{Repo: filepath.Join(r.dir, "kit"), Subdir: "."}, "not its top"},
	} {
		c.o.Out = out
		if _, err := Build(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error saying %q", c.o, err, c.want)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the proxy directory was made (%v)", err)
	}
}

func latest(t *testing.T, vdir string) string {
	t.Helper()
	var inf info
	if err := json.Unmarshal([]byte(readFile(t, filepath.Dir(vdir), "@latest")), &inf); err != nil {
		t.Fatal(err)
	}
	return inf.Version
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
