package integration

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

// goIn runs the go command with args in dir and returns its output; a
// failure fails t.
func goIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// `host new plugin` writes a module that, as written, tidies, builds,
// passes its conformance test, and serves its family to the host with the
// host.hcl written beside it.
func TestNewPlugin(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "greet")
	res := runHost(t, "", "new", "plugin", "greet", "--family", "acme.greet", "--dir", dir, "--sdk", testbin.SourceDir("sdk"), "--tidy")
	if res.code != 0 {
		t.Fatalf("host new plugin: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for _, want := range []string{"\n  conformance_test.go\n", "\n  main.go\n", "ran go mod tidy", "\n  go build -o greet .\n", " conformance --config conformance.hcl\n", "call acme.greet.greet --input -"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, res.stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err != nil {
		t.Errorf("--tidy wrote no go.sum: %v", err)
	}
	goIn(t, dir, "build", "-o", "greet", ".")
	if out := goIn(t, dir, "test", "-count=1", "./..."); !strings.HasPrefix(out, "ok ") {
		t.Errorf("go test:\n%s", out)
	}

	// The generated conformance file passes as generated.
	conf := runHost(t, "", "conformance", "--config", filepath.Join(dir, "conformance.hcl"))
	if conf.code != 0 || !strings.Contains(conf.stdout, "0 failed") {
		t.Errorf("host conformance: exit %d\n%s%s", conf.code, conf.stdout, conf.stderr)
	}

	call := runHost(t, `{"name":"Ada"}`, "--config", filepath.Join(dir, "host.hcl"), "--json", "call", "acme.greet.greet", "--input", "-")
	if call.code != 0 || strings.TrimSpace(call.stdout) != `{"greeting":"Hello, Ada!"}` {
		t.Errorf("host call: exit %d\n%s%s", call.code, call.stdout, call.stderr)
	}
	// The family's own vendor code crosses the wire.
	long := `{"name":"` + strings.Repeat("x", 300) + `"}`
	refused := runHost(t, long, "--config", filepath.Join(dir, "host.hcl"), "call", "acme.greet.greet", "--input", "-")
	if refused.code != 1 || !strings.Contains(refused.stdout, `"code": "acme.name_too_long"`) {
		t.Errorf("host call with a long name: exit %d\n%s%s", refused.code, refused.stdout, refused.stderr)
	}

	// Its method is no pure one: a replay answers it from the log, so it
	// is an effect seam.
	if !effectSeam(t, filepath.Join(dir, "host.hcl"), "acme.greet.greet") {
		t.Error("host effects does not list acme.greet.greet, which host new plugin declared pure without --pure")
	}

	again := runHost(t, "", "new", "plugin", "greet", "--dir", dir, "--sdk", testbin.SourceDir("sdk"))
	if again.code != 1 || !strings.Contains(again.stderr, "is not empty") {
		t.Errorf("host new into the written directory: exit %d\n%s%s", again.code, again.stdout, again.stderr)
	}
}

// `host new plugin --pure` declares the method pure: a replay calls it
// again, so it is no effect seam; the method of the same plugin written
// without --pure is one (TestNewPlugin).
func TestNewPluginPure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lookup")
	res := runHost(t, "", "new", "plugin", "lookup", "--family", "acme.lookup", "--method", "find", "--pure", "--dir", dir, "--sdk", testbin.SourceDir("sdk"), "--tidy")
	if res.code != 0 {
		t.Fatalf("host new plugin --pure: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	goIn(t, dir, "build", "-o", "lookup", ".")
	if effectSeam(t, filepath.Join(dir, "host.hcl"), "acme.lookup.find") {
		t.Error("host effects lists acme.lookup.find, which host new plugin --pure declared pure")
	}
}

// effectSeam reports whether `host effects` on config lists seam.
func effectSeam(t *testing.T, config, seam string) bool {
	t.Helper()
	res := runHost(t, "", "--config", config, "--json", "effects")
	if res.code != 0 {
		t.Fatalf("host effects: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	var manifest struct {
		Seams []struct {
			Seam string `json:"seam"`
		} `json:"seams"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &manifest); err != nil {
		t.Fatalf("host effects --json: %v\n%s", err, res.stdout)
	}
	for _, s := range manifest.Seams {
		if s.Seam == seam {
			return true
		}
	}
	return false
}

// `host new pack` writes a module that tidies, passes its test, builds,
// and runs its node under `host run` with the host.hcl written beside it.
// Without --sdk, the host finds the checkout's SDK above the working
// directory (the test's, inside the checkout).
func TestNewPack(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "notes")
	res := runHost(t, "", "new", "pack", "community.acme.notes", "--dir", dir, "--json")
	if res.code != 0 {
		t.Fatalf("host new pack: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	var report struct {
		Dir, Module, SDK string
		Files, Next      []string
	}
	if err := json.Unmarshal([]byte(res.stdout), &report); err != nil {
		t.Fatalf("--json report: %v\n%s", err, res.stdout)
	}
	if report.Dir != dir || report.Module != "example.com/notes" || report.SDK != testbin.SourceDir("sdk") || len(report.Next) < 2 || report.Next[1] != "go mod tidy" {
		t.Errorf("report %+v", report)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
		t.Error("go.sum written without --tidy")
	}
	goIn(t, dir, "mod", "tidy")
	if out := goIn(t, dir, "test", "-count=1", "./..."); !strings.HasPrefix(out, "ok ") {
		t.Errorf("go test:\n%s", out)
	}
	goIn(t, dir, "build", "-o", "notes", ".")

	run := runHost(t, `{"text":"hello, wide world"}`, "--config", filepath.Join(dir, "host.hcl"), "--json", "run", "notes.count", "--input", "-")
	if run.code != 0 || strings.TrimSpace(run.stdout) != `{"words":3,"characters":17}` {
		t.Errorf("host run: exit %d\n%s%s", run.code, run.stdout, run.stderr)
	}
	// The host checks the input against the schema written.
	bad := runHost(t, `{"txt":"x"}`, "--config", filepath.Join(dir, "host.hcl"), "run", "notes.count", "--input", "-")
	if bad.code != 1 || !strings.Contains(bad.stdout, "validation_error") {
		t.Errorf("host run with a bad input: exit %d\n%s%s", bad.code, bad.stdout, bad.stderr)
	}

	// The go.work the report offers instead of go.mod's replace line
	// builds the module against the same checkout, go.mod naming no SDK.
	work := filepath.Join(t.TempDir(), "notes")
	res = runHost(t, "", "new", "pack", "community.acme.notes", "--dir", work, "--json")
	var offered struct{ GoWork []string }
	if err := json.Unmarshal([]byte(res.stdout), &offered); err != nil || len(offered.GoWork) != 2 {
		t.Fatalf("--json report's goWork: %v\n%s", err, res.stdout)
	}
	for _, step := range offered.GoWork {
		words := strings.Fields(step)
		if words[0] != "go" {
			t.Fatalf("the step %q is not a go command", step)
		}
		goIn(t, work, words[1:]...)
	}
	if goMod, err := os.ReadFile(filepath.Join(work, "go.mod")); err != nil || strings.Contains(string(goMod), "wophost/sdk") {
		t.Errorf("go.mod after the go.work steps (%v):\n%s", err, goMod)
	}
	if use := goIn(t, work, "list", "-m", "-f", "{{.Dir}}", "github.com/wophost/wophost/sdk"); strings.TrimSpace(use) != testbin.SourceDir("sdk") {
		t.Errorf("the workspace builds the SDK of %s; want the checkout's", use)
	}
	goIn(t, work, "build", "-o", "notes", ".")
	run = runHost(t, `{"text":"hello, wide world"}`, "--config", filepath.Join(work, "host.hcl"), "--json", "run", "notes.count", "--input", "-")
	if run.code != 0 || strings.TrimSpace(run.stdout) != `{"words":3,"characters":17}` {
		t.Errorf("host run of the workspace's build: exit %d\n%s%s", run.code, run.stdout, run.stderr)
	}
}

// Outside a checkout, and with a host binary that is not in one, `host
// new` asks for --sdk (a usage error) and writes nothing; a bad name is
// reported before that.
func TestNewWithoutSDK(t *testing.T) {
	wd := t.TempDir()
	cmd := exec.Command(bin.host, "new", "plugin", "greet")
	cmd.Dir = wd
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "pass --sdk") {
		t.Errorf("host new outside a checkout: %v\n%s", err, stderr.String())
	}
	if entries, _ := os.ReadDir(wd); len(entries) != 0 {
		t.Errorf("it wrote %s", entries[0].Name())
	}

	// A bad name is reported first: the SDK would not make it right.
	cmd = exec.Command(bin.host, "new", "pack", "community.notes")
	cmd.Dir = wd
	stderr.Reset()
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), `pack name "community.notes" must be a scope`) {
		t.Errorf("host new pack with a bad name outside a checkout: %v\n%s", err, stderr.String())
	}
}

// A host built naming a version of the SDK (as make does on a commit
// tagged sdk/vX.Y.Z) writes modules that require that version with no
// replace directive, from anywhere, no checkout needed: with the SDK
// served from the directory `make sdk-proxy` writes, the plugin and the
// pack tidy, build, and run under the host as generated.
func TestNewForSDKVersion(t *testing.T) {
	testbin.NeedGitCheckout(t)
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "goproxy")
	sdk, err := testbin.SDKProxy(tmp, proxy, "")
	if err != nil {
		t.Fatal(err)
	}
	released := filepath.Join(tmp, "host")
	if err := testbin.BuildWithFlags(released, testbin.HostPackage, "-ldflags=-X main.sdkVersion="+sdk.Version); err != nil {
		t.Fatal(err)
	}
	env, err := testbin.ModuleEnv(filepath.Join(tmp, "modcache"), "file://"+filepath.ToSlash(proxy))
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, testbin.SDKNoSumDB, "GOWORK=off")
	// Outside any checkout: no SDK directory is there to find.
	wd := filepath.Join(tmp, "src")
	if err := os.Mkdir(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	// newModule runs `host new KIND NAME --dir NAME`, checks its report
	// and go.mod, tidies the module, builds it into exe, and returns its
	// directory.
	newModule := func(exe string, args ...string) string {
		t.Helper()
		args = append(args, "--dir", args[1])
		cmd := exec.Command(released, append([]string{"new"}, args...)...)
		cmd.Dir = wd
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("host new %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if !strings.Contains(string(out), ", SDK "+sdk.Version+"\n") || strings.Contains(string(out), "go.work") {
			t.Errorf("host new %s: the report does not name the SDK version alone:\n%s", strings.Join(args, " "), out)
		}
		dir := filepath.Join(wd, args[1])
		goMod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(goMod), "\nrequire github.com/wophost/wophost/sdk "+sdk.Version+"\n") || strings.Contains(string(goMod), "replace") {
			t.Errorf("go.mod:\n%s", goMod)
		}
		for _, step := range [][]string{{"mod", "tidy"}, {"build", "-o", exe, "."}} {
			cmd := exec.Command("go", step...)
			cmd.Dir, cmd.Env = dir, env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go %s in %s: %v\n%s", strings.Join(step, " "), dir, err, out)
			}
		}
		return dir
	}

	plugin := newModule("greet", "plugin", "greet", "--family", "acme.greet")
	call := runHost(t, `{"name":"Ada"}`, "--config", filepath.Join(plugin, "host.hcl"), "--json", "call", "acme.greet.greet", "--input", "-")
	if call.code != 0 || strings.TrimSpace(call.stdout) != `{"greeting":"Hello, Ada!"}` {
		t.Errorf("host call: exit %d\n%s%s", call.code, call.stdout, call.stderr)
	}
	pack := newModule("notes", "pack", "community.acme.notes")
	run := runHost(t, `{"text":"hello, wide world"}`, "--config", filepath.Join(pack, "host.hcl"), "--json", "run", "notes.count", "--input", "-")
	if run.code != 0 || strings.TrimSpace(run.stdout) != `{"words":3,"characters":17}` {
		t.Errorf("host run: exit %d\n%s%s", run.code, run.stdout, run.stderr)
	}
}
