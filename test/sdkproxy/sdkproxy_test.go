// Package sdkproxy_test builds a vendor's module against the SDK module as
// `make sdk-proxy` serves it from a directory, with no replace directive:
// what a vendor does until the SDK's sdk/vX.Y.Z tags are on a public
// module proxy.
package sdkproxy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wophost/wophost/test/testbin"
)

// goRun runs the go command with args in dir under env and returns its
// output and error.
func goRun(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// copyInto copies the repository's file rel to dst.
func copyInto(t *testing.T, rel, dst string) {
	t.Helper()
	b, err := os.ReadFile(testbin.SourceDir(rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A vendor's module that requires the SDK at the version `make sdk-proxy`
// wrote, with GOPROXY naming that directory and GONOSUMDB the SDK's
// repository, tidies and builds a capability plugin (sdk/plugin) and a
// node pack (sdk/pack), with the SDK taken from the directory: the
// version and go.sum hashes are those sdk-proxy wrote. Without GONOSUMDB
// the go command refuses the version, which no checksum database knows.
func TestVendorModuleFromProxyDirectory(t *testing.T) {
	testbin.NeedGitCheckout(t)
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "goproxy")
	res, err := testbin.SDKProxy(filepath.Join(tmp, "bin"), proxy, "")
	if err != nil {
		t.Fatal(err)
	}
	// The directory as the GOPROXY protocol lays it out.
	for _, name := range []string{"list", res.Version + ".info", res.Version + ".mod", res.Version + ".zip"} {
		if _, err := os.Stat(filepath.Join(proxy, "github.com", "wophost", "wophost", "sdk", "@v", name)); err != nil {
			t.Errorf("the proxy directory lacks @v/%s: %v", name, err)
		}
	}

	vendor := filepath.Join(tmp, "vendor")
	goMod := "module example.com/vendor\n\ngo 1.26.0\n\nrequire github.com/wophost/wophost/sdk " + res.Version + "\n"
	if err := os.MkdirAll(vendor, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vendor, "go.mod"), []byte(goMod), 0o644); err != nil {
		t.Fatal(err)
	}
	// The example plugin and pack, as a vendor's own code.
	copyInto(t, "examples/plugins/hello/main.go", filepath.Join(vendor, "plugin", "main.go"))
	for _, rel := range []string{"main.go", "pack.json"} {
		copyInto(t, "examples/packs/greeter/"+rel, filepath.Join(vendor, "pack", rel))
	}
	env, err := testbin.ModuleEnv(filepath.Join(tmp, "modcache"), "file://"+filepath.ToSlash(proxy))
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, "GOWORK=off")

	// The near miss: the same, but the checksum database is asked.
	out, err := goRun(vendor, append(env, "GONOSUMDB=", "GOPRIVATE=", "GOSUMDB=sum.golang.org"), "mod", "tidy")
	if err == nil || !strings.Contains(out, "verifying") {
		t.Errorf("go mod tidy asking the checksum database: %v; want it refused\n%s", err, out)
	}

	env = append(env, testbin.SDKNoSumDB)
	if out, err := goRun(vendor, env, "mod", "tidy"); err != nil {
		t.Fatalf("go mod tidy: %v\n%s", err, out)
	}
	bin := filepath.Join(tmp, "out")
	if out, err := goRun(vendor, env, "build", "-o", bin+"/", "./plugin", "./pack"); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, exe := range []string{"plugin", "pack"} {
		if fi, err := os.Stat(filepath.Join(bin, exe)); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("no executable %s built (%v)", exe, err)
		}
	}

	// The SDK built is the version from the directory, not a checkout.
	out, err = goRun(vendor, env, "list", "-m", "-json", "github.com/wophost/wophost/sdk")
	if err != nil {
		t.Fatalf("go list -m: %v\n%s", err, out)
	}
	var m struct {
		Version string
		Dir     string
		Replace *struct{ Path string }
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != res.Version || m.Replace != nil || !strings.HasPrefix(m.Dir, filepath.Join(tmp, "modcache")) {
		t.Errorf("the SDK module: %+v; want %s from the proxy directory, not replaced", m, res.Version)
	}
	sum, err := os.ReadFile(filepath.Join(vendor, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"github.com/wophost/wophost/sdk " + res.Version + " " + res.Sum + "\n",
		"github.com/wophost/wophost/sdk " + res.Version + "/go.mod " + res.ModSum + "\n",
	} {
		if !strings.Contains(string(sum), line) {
			t.Errorf("go.sum lacks %q, which sdk-proxy reported:\n%s", line, sum)
		}
	}
}
