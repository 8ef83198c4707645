package testbin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wophost/wophost/internal/goproxy"
)

// SDKNoSumDB is what a vendor sets GONOSUMDB to while the SDK's versions
// are served from a proxy directory: the checksum database knows no
// version of the module, and the go command refuses one it cannot verify.
const SDKNoSumDB = "GONOSUMDB=github.com/wophost/wophost"

// NeedGitCheckout skips tb unless git is installed and the repository is a
// git work tree: the SDK's module is written from a commit.
func NeedGitCheckout(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		tb.Skip("needs the go command")
	}
	if _, err := exec.LookPath("git"); err != nil {
		tb.Skip("needs git: the SDK's module is written from a commit")
	}
	cmd := exec.Command("git", "rev-parse", "--show-toplevel")
	cmd.Dir = SourceDir("")
	if err := cmd.Run(); err != nil {
		tb.Skip("the source is no git work tree: the SDK's module is written from a commit")
	}
}

// SDKProxy builds cmd/sdk-proxy into binDir and runs it as `make
// sdk-proxy` does, writing the SDK module at HEAD into out, as version
// when it is not empty (else its tag's or pseudo-version); it returns
// what was written.
func SDKProxy(binDir, out, version string) (*goproxy.Result, error) {
	exe := filepath.Join(binDir, "sdk-proxy")
	if err := BuildWithFlags(exe, "./cmd/sdk-proxy"); err != nil {
		return nil, err
	}
	args := []string{"-repo", SourceDir(""), "-out", out, "-json"}
	if version != "" {
		args = append(args, "-version", version)
	}
	cmd := exec.Command(exe, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("sdk-proxy %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var res goproxy.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("sdk-proxy -json: %v\n%s", err, stdout.String())
	}
	return &res, nil
}

// ModuleEnv is the environment for go commands a test runs in a module of
// its own that fetches the SDK from a proxy directory. Its module cache is
// modCache, the test's own: a version a test serves never reaches the
// user's cache, and none already there hides what the test serves; it is
// left writable, so that the test's directory can be removed. GOPROXY is
// proxies, then the user's module cache (itself laid out as a proxy, so
// the SDK's dependencies come from there when it holds them), then the
// user's GOPROXY. Builds are -trimpath, which makes their compiled
// packages the same whatever the cache's directory, so they are reused
// from one run to the next.
func ModuleEnv(modCache string, proxies ...string) ([]string, error) {
	out, err := exec.Command("go", "env", "-json", "GOMODCACHE", "GOPROXY", "GOFLAGS").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	var env struct{ GOMODCACHE, GOPROXY, GOFLAGS string }
	if err := json.Unmarshal(out, &env); err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	chain := append(append([]string(nil), proxies...), "file://"+filepath.ToSlash(filepath.Join(env.GOMODCACHE, "cache", "download")))
	if env.GOPROXY != "" {
		chain = append(chain, env.GOPROXY)
	}
	return append(os.Environ(),
		"GOMODCACHE="+modCache,
		"GOPROXY="+strings.Join(chain, ","),
		"GOFLAGS="+strings.TrimSpace(env.GOFLAGS+" -modcacherw -trimpath"),
	), nil
}
