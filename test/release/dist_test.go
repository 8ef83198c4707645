// Package release_test checks what `make release` builds: the archives,
// SHA256SUMS and its signature, the .deb and the .rpm, and, with
// WOPHOST_TEST_INSTALL=1, the .deb installed on this machine.
//
// The tests take the release from WOPHOST_RELEASE_DIST, a directory `make
// release` wrote; without it the first test that needs a release builds
// one for this machine's platform into a temporary directory (one to three
// minutes on two cores with a warm build cache). The tests of the Makefile
// and of the page's file table need none.
package release_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/wophost/wophost/test/testbin"
)

// distEnv names a release directory the tests check instead of building
// one, absolute or relative to the repository; pubKeyEnv names the public key file SHA256SUMS is signed with when
// that release was not signed with a one-off key.
const (
	distEnv   = "WOPHOST_RELEASE_DIST"
	pubKeyEnv = "WOPHOST_RELEASE_PUBKEY"
)

// release is the release the tests check, laid out by TestMain.
type release struct {
	dir string
	// version is VERSION, as the archives are named and the host prints
	// it.
	version string
	// host is a host binary of this machine's platform from the release,
	// extracted from its archive.
	host string
	// pubKey is the public key file SHA256SUMS is signed with.
	pubKey string
}

// The release under test is found or built once, by the first test that
// needs it (theRelease), in the temporary directory TestMain makes: tests
// of the Makefile and the page alone run without one.
var (
	tmpDir      string
	releaseOnce sync.Once
	releaseVal  *release
	releaseErr  error
)

// theRelease returns the release under test, finding or building it the
// first time.
func theRelease(t *testing.T) *release {
	t.Helper()
	releaseOnce.Do(func() { releaseVal, releaseErr = setUp(tmpDir) })
	if releaseErr != nil {
		t.Fatalf("the release under test: %v", releaseErr)
	}
	return releaseVal
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "wophost-release-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	tmpDir = dir
	return m.Run()
}

// setUp finds or builds the release, and extracts the host of this
// machine's platform from its archive.
func setUp(tmp string) (*release, error) {
	dir := os.Getenv(distEnv)
	if dir == "" {
		dir = filepath.Join(tmp, "dist")
		platform := runtime.GOOS + "/" + runtime.GOARCH
		fmt.Fprintf(os.Stderr, "release tests: %s is not set: building the release for %s into %s\n", distEnv, platform, dir)
		cmd := exec.Command("make", "--no-print-directory", "release", "RELEASE_PLATFORMS="+platform, "DIST="+dir)
		cmd.Dir = testbin.SourceDir("")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("make release: %v\n%s", err, out)
		}
	}
	if !filepath.IsAbs(dir) {
		// As make was given it: relative to the repository.
		dir = testbin.SourceDir(dir)
	}
	r := &release{dir: dir, pubKey: os.Getenv(pubKeyEnv)}
	if r.pubKey == "" {
		r.pubKey = filepath.Join(dir, "one-off-key", "one-off.pub.json")
	}
	archive, version, err := archiveFor(dir, runtime.GOOS, runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	r.version = version
	x := filepath.Join(tmp, "host")
	if out, err := exec.Command("tar", "-xzf", archive, "-C", tmp, "--strip-components=1", topDir(version, runtime.GOOS, runtime.GOARCH)+"/host").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("extract the host from %s: %v\n%s", archive, err, out)
	}
	r.host = x
	return r, nil
}

// archiveName matches a release archive's name: VERSION, OS and ARCH.
var archiveName = regexp.MustCompile(`^wophost_(.+)_([a-z0-9]+)_([a-z0-9]+)\.tar\.gz$`)

// archiveFor finds the archive of goos/goarch in dir and the VERSION it
// is named with.
func archiveFor(dir, goos, goarch string) (path, version string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", "", err
	}
	for _, e := range entries {
		m := archiveName.FindStringSubmatch(e.Name())
		if m != nil && m[2] == goos && m[3] == goarch {
			return filepath.Join(dir, e.Name()), m[1], nil
		}
	}
	return "", "", fmt.Errorf("%s has no archive for %s/%s (make release RELEASE_PLATFORMS=%s/%s)", dir, goos, goarch, goos, goarch)
}

// topDir is the directory an archive holds everything under.
func topDir(version, goos, goarch string) string {
	return fmt.Sprintf("wophost_%s_%s_%s", version, goos, goarch)
}

// programs are the programs a release of goos holds: the host, the
// launcher on Linux (containment is Linux's alone) and every plugin of
// the repository, as wophost-NAME.
func programs(t *testing.T, goos string) []string {
	t.Helper()
	out := []string{"host"}
	if goos == "linux" {
		out = append(out, "wophost-launch")
	}
	for _, pattern := range []string{"plugins/*/main.go", "examples/plugins/*/main.go"} {
		mains, err := filepath.Glob(testbin.SourceDir(pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mains {
			out = append(out, "wophost-"+filepath.Base(filepath.Dir(m)))
		}
	}
	if len(out) < 4 {
		t.Fatalf("found only %v: the plugins of the repository are not where the test looks", out)
	}
	sort.Strings(out)
	return out
}

// hostCmd runs the release's host with args.
func hostCmd(t *testing.T, args ...string) *exec.Cmd {
	return exec.Command(theRelease(t).host, args...)
}

// artifacts lists the top-level files of the release directory and the
// files of its SDK module directory, goproxy/: what SHA256SUMS must cover,
// itself and its signature aside.
func artifacts(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(theRelease(t).dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || name == "SHA256SUMS" || name == "SHA256SUMS.sig" {
			continue
		}
		out = append(out, name)
	}
	proxy := filepath.Join(theRelease(t).dir, "goproxy")
	err = filepath.WalkDir(proxy, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(theRelease(t).dir, path)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatalf("the release's SDK module directory: %v", err)
	}
	if !slices.ContainsFunc(out, func(name string) bool {
		return strings.HasPrefix(name, "goproxy/github.com/wophost/wophost/sdk/@v/") && strings.HasSuffix(name, ".zip")
	}) {
		t.Fatalf("the release's goproxy/ holds no SDK module zip: %v", out)
	}
	sort.Strings(out)
	return out
}
