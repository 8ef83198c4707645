package release_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/wophost/wophost/test/testbin"
)

// Every archive of the release holds, under one top directory named like
// it, the programs of its platform (the launcher on Linux only), README.md,
// the licence when the repository has one and host.hcl, and nothing else;
// the programs are executable, owned by root, and a Linux program is
// statically linked.
func TestArchives(t *testing.T) {
	entries, err := os.ReadDir(theRelease(t).dir)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, e := range entries {
		m := archiveName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		found++
		version, goos, goarch := m[1], m[2], m[3]
		if version != theRelease(t).version {
			t.Errorf("%s: version %s, the release's is %s", e.Name(), version, theRelease(t).version)
		}
		t.Run(goos+"_"+goarch, func(t *testing.T) {
			checkArchive(t, filepath.Join(theRelease(t).dir, e.Name()), topDir(version, goos, goarch), goos)
		})
	}
	if found == 0 {
		t.Fatalf("%s holds no archive", theRelease(t).dir)
	}
}

func checkArchive(t *testing.T, path, top, goos string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"README.md": false, "host.hcl": false}
	progs := programs(t, goos)
	for _, p := range progs {
		want[p] = true
	}
	for _, l := range []string{"LICENSE", "LICENSE.md", "COPYING"} {
		if _, err := os.Stat(testbin.SourceDir(l)); err == nil {
			want[l] = false
		}
	}
	var got []string
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: owner %d:%d, want 0:0", h.Name, h.Uid, h.Gid)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if name == top {
			continue
		}
		rest, ok := strings.CutPrefix(name, top+"/")
		if !ok || strings.Contains(rest, "/") {
			t.Errorf("%s: not a file of the top directory %s", h.Name, top)
			continue
		}
		got = append(got, rest)
		exe, listed := want[rest]
		switch {
		case !listed:
			t.Errorf("%s: not a file of a release", h.Name)
		case exe && h.Mode&0o777 != 0o755:
			t.Errorf("%s: mode %o, want 755", h.Name, h.Mode&0o777)
		case !exe && h.Mode&0o777 != 0o644:
			t.Errorf("%s: mode %o, want 644", h.Name, h.Mode&0o777)
		}
		if exe && goos == "linux" {
			checkStatic(t, h.Name, tr)
		}
	}
	sort.Strings(got)
	var wantNames []string
	for n := range want {
		wantNames = append(wantNames, n)
	}
	sort.Strings(wantNames)
	if !slices.Equal(got, wantNames) {
		t.Errorf("%s holds %v, want %v", filepath.Base(path), got, wantNames)
	}
}

// checkStatic fails t unless the ELF program r holds asks for no
// dynamic loader.
func checkStatic(t *testing.T, name string, r io.Reader) {
	t.Helper()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Errorf("%s: not an ELF program: %v", name, err)
		return
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: dynamically linked (it names a program interpreter); the release builds with CGO_ENABLED=0", name)
		}
	}
}

// The archive of this machine's platform runs: its host prints the
// release's VERSION, and `host validate` accepts the host.hcl beside it
// with its plugins (started, every capability ready).
func TestArchiveRuns(t *testing.T) {
	archive, _, err := archiveFor(theRelease(t).dir, runtime.GOOS, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xzf", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	top := filepath.Join(dir, topDir(theRelease(t).version, runtime.GOOS, runtime.GOARCH))
	out, err := exec.Command(filepath.Join(top, "host"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), " "+theRelease(t).version+"\n") {
		t.Errorf("host --version: %v\n%s\nwant the version %s", err, out, theRelease(t).version)
	}
	out, err = exec.Command(filepath.Join(top, "host"), "--config", filepath.Join(top, "host.hcl"), "validate").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "no problems; 4 of 4 capabilities ready") {
		t.Errorf("host validate on the archive's host.hcl: %v\n%s", err, out)
	}
}

// SHA256SUMS lists every top-level file of the release but itself and its
// signature, once each, with its sha256, in sha256sum's format.
func TestChecksums(t *testing.T) {
	f, err := os.Open(filepath.Join(theRelease(t).dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var listed []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Errorf("SHA256SUMS line %q: not sha256sum's format", sc.Text())
			continue
		}
		listed = append(listed, name)
		if got := fileSHA256(t, filepath.Join(theRelease(t).dir, name)); got != sum {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s", name, got, sum)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(listed)
	if want := artifacts(t); !slices.Equal(listed, want) {
		t.Errorf("SHA256SUMS lists %v, the release's files are %v", listed, want)
	}
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Error(err)
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// SHA256SUMS.sig verifies with the release's public key through `host
// keys verify-file`, and fails once a byte of SHA256SUMS or of the
// signature changed.
func TestSignature(t *testing.T) {
	verify := func(dir string) (int, string) {
		cmd := hostCmd(t, "keys", "verify-file", "--key", theRelease(t).pubKey, filepath.Join(dir, "SHA256SUMS"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return ee.ExitCode(), string(out)
			}
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := verify(theRelease(t).dir); code != 0 || !strings.Contains(out, "verified: signed by key") {
		t.Fatalf("the release's SHA256SUMS: exit %d\n%s", code, out)
	}
	for _, file := range []string{"SHA256SUMS", "SHA256SUMS.sig"} {
		dir := t.TempDir()
		for _, f := range []string{"SHA256SUMS", "SHA256SUMS.sig"} {
			data, err := os.ReadFile(filepath.Join(theRelease(t).dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if f == file {
				changeOneByte(t, f, data)
			}
			if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if code, out := verify(dir); code != 1 || !strings.Contains(out, "not verified") {
			t.Errorf("%s with one byte changed: exit %d, want 1 and not verified\n%s", file, code, out)
		}
	}
}

// changeOneByte changes one byte of a file's data in place: a hex digit
// of the first checksum, or a base64 digit of the signature.
func changeOneByte(t *testing.T, name string, data []byte) {
	t.Helper()
	i := 0
	if name == "SHA256SUMS.sig" {
		i = strings.Index(string(data), `"signature": "`) + len(`"signature": "`) + 5
	}
	if data[i] == 'A' || data[i] == '0' {
		data[i] = 'B'
		if name == "SHA256SUMS" {
			data[i] = '1'
		}
		return
	}
	if name == "SHA256SUMS" {
		data[i] = '0'
	} else {
		data[i] = 'A'
	}
}

// Every program of the release type-checks for every platform `make
// release` builds by default, whichever platforms the release under test
// holds: a platform's own system call types (a Stat_t's fields) must not
// break another's build.
func TestDefaultPlatformsCompile(t *testing.T) {
	mk, err := os.ReadFile(testbin.SourceDir("Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RELEASE_PLATFORMS \?= (.+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile sets no RELEASE_PLATFORMS")
	}
	for _, p := range strings.Fields(string(m[1])) {
		goos, goarch, _ := strings.Cut(p, "/")
		pkgs := []string{"./cmd/host"}
		for _, prog := range programs(t, goos) {
			if prog == "host" {
				continue
			}
			name := strings.TrimPrefix(prog, "wophost-")
			for _, dir := range []string{"cmd/" + prog, "plugins/" + name, "examples/plugins/" + name} {
				if _, err := os.Stat(testbin.SourceDir(dir + "/main.go")); err == nil {
					pkgs = append(pkgs, "./"+dir)
				}
			}
		}
		if len(pkgs) != len(programs(t, goos)) {
			t.Fatalf("%s: found the sources of %v, want one for each of %v", p, pkgs, programs(t, goos))
		}
		// Type-checked for the platform, as the compiler would, without
		// linking: it takes seconds once the build cache is warm.
		cmd := exec.Command("go", append([]string{"vet"}, pkgs...)...)
		cmd.Dir = testbin.SourceDir("")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go vet for %s: %v\n%s", p, err, out)
		}
	}
}
