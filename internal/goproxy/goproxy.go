// Package goproxy writes one version of a Go module, as a commit of a git
// repository holds it, into a directory laid out as a module proxy: the
// files the go command reads with GOPROXY=file://DIR (the GOPROXY
// protocol's $module/@v/list, $version.info, .mod and .zip, and
// $module/@latest), under the module path and version case-encoded as the
// protocol says.
//
// The zip holds what the go command would fetch from the repository at
// that commit: the files git archive gives for the module's directory,
// checked and filtered by golang.org/x/mod/zip as the go command checks
// them, so its go.sum hash is the one a public proxy serving the same
// commit would have.
package goproxy

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"

	"github.com/wophost/wophost/internal/atomicfile"
)

// Options say which module to write, at which version, and where.
type Options struct {
	// Repo is the top directory of the repository's work tree (a linked
	// worktree's too).
	Repo string
	// Subdir is the module's directory in the repository, with forward
	// slashes; "" is the repository's root. The module's version tags are
	// named Subdir + "/" + version ("sdk/v0.2.0"), Go's scheme for a
	// module in a subdirectory.
	Subdir string
	// Rev is the commit to write, anything git rev-parse takes; "" means
	// the tag of Version when there is one, else HEAD.
	Rev string
	// Version is the version to write the commit as; "" means the
	// commit's own (see Resolve).
	Version string
	// Out is the proxy directory; it is created if need be, and the
	// versions already in it are kept.
	Out string
}

// Result is what Build wrote.
type Result struct {
	// Module is the module path, from the commit's go.mod.
	Module string
	// Version is the version written.
	Version string
	// Commit is the full hash of the commit written.
	Commit string
	// Time is the commit's committer time, the .info file's Time.
	Time time.Time
	// Tag is the tag Version comes from; "" for a pseudo-version or a
	// version given for a commit without that tag.
	Tag string
	// Dir is the module's @v directory in Out.
	Dir string
	// Sum and ModSum are the module's go.sum hashes (h1:...): of the zip,
	// and of the go.mod file.
	Sum, ModSum string
	// Existed is set when Out already held the version with this content,
	// which was then left as it was.
	Existed bool
	// Dirty is set when the commit written is HEAD and the module's
	// directory has changes not committed, which the zip leaves out.
	Dirty bool
}

// info is the JSON of a $version.info file and of @latest.
type info struct {
	Version string
	Time    time.Time
}

// Build writes the module of o.Subdir, at the commit and version Resolve
// chooses, into o.Out. A version already in o.Out is never changed: the
// same content again is left as it is (Result.Existed), other content is
// an error, since the go command and go.sum files take a version's
// content for fixed. A module whose files the go command would refuse
// (a path it cannot hold, two names differing only in case, a file too
// large) is an error naming each file, and nothing is written.
func Build(o Options) (*Result, error) {
	repo, err := workTree(o.Repo)
	if err != nil {
		return nil, err
	}
	o.Repo = repo
	o.Subdir = strings.Trim(path.Clean("/"+filepath.ToSlash(o.Subdir)), "/")
	commit, tag, err := chooseCommit(o)
	if err != nil {
		return nil, err
	}
	res := &Result{Commit: commit, Tag: tag}
	if res.Time, err = commitTime(o.Repo, commit); err != nil {
		return nil, err
	}
	files, err := archive(o.Repo, commit, o.Subdir)
	if err != nil {
		return nil, err
	}
	mod, err := goMod(files)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %s: %w", short(commit), gomodPath(o.Subdir), err)
	}
	res.Module = modfile.ModulePath(mod)
	if res.Module == "" {
		return nil, fmt.Errorf("commit %s: %s names no module", short(commit), gomodPath(o.Subdir))
	}
	res.Version = o.Version
	if res.Version == "" {
		if res.Version, res.Tag, err = Resolve(o.Repo, o.Subdir, res.Module, commit, res.Time); err != nil {
			return nil, err
		}
	}
	if err := module.Check(res.Module, res.Version); err != nil {
		return nil, fmt.Errorf("version %s: %w", res.Version, err)
	}
	if res.ModSum, err = modSum(mod); err != nil {
		return nil, err
	}
	if res.Dirty, err = dirty(o.Repo, o.Subdir, commit); err != nil {
		return nil, err
	}
	if err := write(o.Out, res, files, mod); err != nil {
		return nil, err
	}
	return res, nil
}

// chooseCommit resolves the commit Build writes, and the tag of
// o.Version when it has one.
func chooseCommit(o Options) (commit, tag string, err error) {
	if o.Version != "" {
		if semver.Canonical(o.Version) != o.Version || semver.Build(o.Version) != "" {
			return "", "", fmt.Errorf("version %q is not a canonical semantic version such as v0.2.0", o.Version)
		}
		name := tagName(o.Subdir, o.Version)
		tagged, err := revParse(o.Repo, "refs/tags/"+name)
		if err == nil {
			tag = name
		}
		if o.Rev == "" {
			if tag != "" {
				return tagged, tag, nil
			}
			o.Rev = "HEAD"
		}
		commit, err := revParse(o.Repo, o.Rev)
		if err != nil {
			return "", "", err
		}
		if tag != "" && tagged != commit {
			return "", "", fmt.Errorf("version %s is the tag %s, commit %s, not %s (%s): a version names one commit", o.Version, tag, short(tagged), o.Rev, short(commit))
		}
		return commit, tag, nil
	}
	if o.Rev == "" {
		o.Rev = "HEAD"
	}
	commit, err = revParse(o.Repo, o.Rev)
	return commit, "", err
}

// Resolve returns the version the go command gives commit of the module
// modPath in subdir: the highest version tag on the commit (a tag
// subdir/vX.Y.Z valid for the module's major version), else a
// pseudo-version after the highest such tag the commit descends from
// (v0.2.1-0.20260102030405-abcdef123456 after v0.2.0; v0.0.0-... when
// there is none), made of t and the commit's first 12 hex digits. tag is
// the tag of a tagged version, "" for a pseudo-version.
func Resolve(repo, subdir, modPath, commit string, t time.Time) (version, tag string, err error) {
	at, err := tagVersions(repo, subdir, modPath, "--points-at", commit)
	if err != nil {
		return "", "", err
	}
	if v := highest(at); v != "" {
		return v, tagName(subdir, v), nil
	}
	before, err := tagVersions(repo, subdir, modPath, "--merged", commit)
	if err != nil {
		return "", "", err
	}
	_, pathMajor, _ := module.SplitPathVersion(modPath)
	major := module.PathMajorPrefix(pathMajor)
	return module.PseudoVersion(major, highest(before), t, short(commit)), "", nil
}

// tagVersions lists the versions of the module's tags git tag selects
// with filter (--points-at or --merged) and commit, leaving out tags that
// are no version of this module: not canonical, with build metadata, a
// pseudo-version's form, or of another major version.
func tagVersions(repo, subdir, modPath, filter, commit string) ([]string, error) {
	prefix := tagName(subdir, "")
	out, err := git(repo, "tag", "--list", prefix+"v*", filter, commit)
	if err != nil {
		return nil, err
	}
	var versions []string
	for _, name := range strings.Fields(string(out)) {
		v := strings.TrimPrefix(name, prefix)
		if semver.Canonical(v) != v || semver.Build(v) != "" || module.IsPseudoVersion(v) || module.Check(modPath, v) != nil {
			continue
		}
		versions = append(versions, v)
	}
	return versions, nil
}

// highest is the highest of versions by semver, "" for none.
func highest(versions []string) string {
	best := ""
	for _, v := range versions {
		if best == "" || semver.Compare(v, best) > 0 {
			best = v
		}
	}
	return best
}

// tagName is the tag of version for the module in subdir.
func tagName(subdir, version string) string {
	if subdir == "" {
		return version
	}
	return subdir + "/" + version
}

func gomodPath(subdir string) string { return path.Join(subdir, "go.mod") }

// short is a commit's first 12 hex digits, as a pseudo-version has them.
func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// workTree checks that dir is the top of a git work tree and returns it
// absolute.
func workTree(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	out, err := git(abs, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", fmt.Errorf("%s is not a git work tree: %w", abs, err)
	}
	top := strings.TrimSpace(string(out))
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	if filepath.Clean(top) != real {
		return "", fmt.Errorf("%s is inside the git work tree %s, not its top: give the top and the module's directory in it", abs, top)
	}
	return abs, nil
}

// git runs git in repo and returns its standard output; a failure's error
// holds what git said.
func git(repo string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = repo
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// revParse returns the full hash of the commit rev names.
func revParse(repo, rev string) (string, error) {
	out, err := git(repo, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("%s names no commit", rev)
	}
	return strings.TrimSpace(string(out)), nil
}

// commitTime is the commit's committer time, which the go command gives
// a version's .info and a pseudo-version.
func commitTime(repo, commit string) (time.Time, error) {
	out, err := git(repo, "show", "-s", "--format=%ct", commit)
	if err != nil {
		return time.Time{}, err
	}
	sec, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("commit %s: committer time %q: %w", short(commit), out, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// dirty reports whether commit is HEAD's and subdir has changes not
// committed, tracked or not.
func dirty(repo, subdir, commit string) (bool, error) {
	head, err := revParse(repo, "HEAD")
	if err != nil || head != commit {
		return false, nil
	}
	pathspec := subdir
	if pathspec == "" {
		pathspec = "."
	}
	out, err := git(repo, "status", "--porcelain", "--", pathspec)
	if err != nil {
		return false, err
	}
	return len(bytes.TrimSpace(out)) > 0, nil
}

// archived is a file of git archive's output, as golang.org/x/mod/zip
// takes a module's files.
type archived struct {
	name string
	f    *zip.File
}

func (a archived) Path() string                 { return a.name }
func (a archived) Lstat() (os.FileInfo, error)  { return a.f.FileInfo(), nil }
func (a archived) Open() (io.ReadCloser, error) { return a.f.Open() }

// data is a file held in memory.
type data struct {
	name string
	b    []byte
}

func (d data) Path() string                 { return d.name }
func (d data) Lstat() (os.FileInfo, error)  { return dataInfo{d}, nil }
func (d data) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(d.b)), nil }

type dataInfo struct{ d data }

func (i dataInfo) Name() string       { return path.Base(i.d.name) }
func (i dataInfo) Size() int64        { return int64(len(i.d.b)) }
func (i dataInfo) Mode() fs.FileMode  { return 0o644 }
func (i dataInfo) ModTime() time.Time { return time.Time{} }
func (i dataInfo) IsDir() bool        { return false }
func (i dataInfo) Sys() any           { return nil }

// archive lists the module's files at commit as the go command fetches
// them from git: git archive of subdir (which honours export-ignore),
// line endings as committed, and the repository's LICENSE when subdir has
// none. golang.org/x/mod/zip.CreateFromVCS does the same, but only in a
// repository whose .git is a directory, which a linked worktree's is not.
func archive(repo, commit, subdir string) ([]modzip.File, error) {
	args := []string{"-c", "core.autocrlf=input", "-c", "core.eol=lf", "archive", "--format=zip", commit}
	if subdir != "" {
		args = append(args, "--", subdir)
	}
	out, err := git(repo, args...)
	if err != nil {
		return nil, fmt.Errorf("the files of %q at commit %s: %w", subdir, short(commit), err)
	}
	zr, err := zip.NewReader(bytes.NewReader(out), int64(len(out)))
	if err != nil {
		return nil, fmt.Errorf("git archive of commit %s: %w", short(commit), err)
	}
	prefix := tagName(subdir, "")
	var files []modzip.File
	license := false
	for _, f := range zr.File {
		name, ok := strings.CutPrefix(f.Name, prefix)
		if !ok || name == "" || strings.HasSuffix(name, "/") {
			continue
		}
		files = append(files, archived{name: name, f: f})
		license = license || name == "LICENSE"
	}
	if !license && subdir != "" {
		if b, err := git(repo, "cat-file", "blob", commit+":LICENSE"); err == nil {
			files = append(files, data{name: "LICENSE", b: b})
		}
	}
	return files, nil
}

// goMod returns the content of the module's go.mod among files.
func goMod(files []modzip.File) ([]byte, error) {
	for _, f := range files {
		if f.Path() != "go.mod" {
			continue
		}
		r, err := f.Open()
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return io.ReadAll(io.LimitReader(r, modzip.MaxGoMod+1))
	}
	return nil, errors.New("no such file")
}

// modSum is the go.sum hash of a go.mod file, as the go command computes
// it: the module hash of a tree holding only that file.
func modSum(mod []byte) (string, error) {
	return dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(mod)), nil
	})
}

// write writes res's version into the proxy directory out: the zip of
// files (made and hashed first, into a temporary file), the .mod, the
// .info last, then the list and @latest from every version there.
func write(out string, res *Result, files []modzip.File, mod []byte) (err error) {
	escPath, err := module.EscapePath(res.Module)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(res.Version)
	if err != nil {
		return err
	}
	modDir := filepath.Join(out, filepath.FromSlash(escPath))
	res.Dir = filepath.Join(modDir, "@v")
	base := filepath.Join(res.Dir, escVersion)
	mv := module.Version{Path: res.Module, Version: res.Version}

	// The zip is made before anything is written, so that a module the
	// go command would refuse leaves out as it was.
	var z bytes.Buffer
	if err := modzip.Create(&z, mv, files); err != nil {
		return fmt.Errorf("commit %s: %w", short(res.Commit), err)
	}
	if err := os.MkdirAll(res.Dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(res.Dir, atomicfile.TempPrefix+escVersion+"-*.zip")
	if err != nil {
		return err
	}
	defer func() {
		tmp.Close()
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(z.Bytes()); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if res.Sum, err = dirhash.HashZip(tmp.Name(), dirhash.Hash1); err != nil {
		return err
	}

	if _, statErr := os.Stat(base + ".zip"); statErr == nil {
		there, err := dirhash.HashZip(base+".zip", dirhash.Hash1)
		if err != nil {
			return fmt.Errorf("%s: %w", base+".zip", err)
		}
		thereMod, err := os.ReadFile(base + ".mod")
		if err != nil {
			return err
		}
		if there != res.Sum || !bytes.Equal(thereMod, mod) {
			return fmt.Errorf("%s %s is already in %s with other content (zip %s there, %s from commit %s): a version's content never changes, so write this commit as another version", res.Module, res.Version, out, there, res.Sum, short(res.Commit))
		}
		res.Existed = true
		os.Remove(tmp.Name())
	} else {
		if err := os.Chmod(tmp.Name(), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp.Name(), base+".zip"); err != nil {
			return err
		}
		if err := atomicfile.Write(base+".mod", mod, 0o644); err != nil {
			return err
		}
		js, err := json.Marshal(info{Version: res.Version, Time: res.Time})
		if err != nil {
			return err
		}
		if err := atomicfile.Write(base+".info", append(js, '\n'), 0o644); err != nil {
			return err
		}
	}
	return writeIndex(modDir)
}

// writeIndex writes @v/list, the versions in modDir that are not
// pseudo-versions (the GOPROXY protocol leaves those out of it), in
// semver order, and @latest, the .info of the highest version there,
// which the go command reads when the list offers it none.
func writeIndex(modDir string) error {
	vdir := filepath.Join(modDir, "@v")
	entries, err := os.ReadDir(vdir)
	if err != nil {
		return err
	}
	var all, listed []string
	for _, e := range entries {
		esc, ok := strings.CutSuffix(e.Name(), ".info")
		if !ok {
			continue
		}
		v, err := module.UnescapeVersion(esc)
		if err != nil || !semver.IsValid(v) {
			continue
		}
		all = append(all, v)
		if !module.IsPseudoVersion(v) {
			listed = append(listed, v)
		}
	}
	semver.Sort(listed)
	var list bytes.Buffer
	for _, v := range listed {
		list.WriteString(v + "\n")
	}
	if err := atomicfile.Write(filepath.Join(vdir, "list"), list.Bytes(), 0o644); err != nil {
		return err
	}
	latest := highest(all)
	if latest == "" {
		return nil
	}
	esc, err := module.EscapeVersion(latest)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(vdir, esc+".info"))
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(modDir, "@latest"), b, 0o644)
}
