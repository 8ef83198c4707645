// Package integration drives the real host, plugin and pack binaries
// through the real host: nothing of go-plugin is mocked.
package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/test/testbin"
)

// bins holds the binaries TestMain builds once for every test.
type bins struct {
	dir     string
	host    string
	testcap string
	kv      string
	probe   string
	// cache builds, on first use, what a test file needs beyond the above.
	cache *testbin.Cache
}

func buildBinaries(dir string) (*bins, error) {
	b := &bins{
		dir:     dir,
		host:    filepath.Join(dir, "host"),
		testcap: filepath.Join(dir, "testcap"),
		kv:      filepath.Join(dir, "wophost-kv"),
		probe:   filepath.Join(dir, "probe"),
		cache:   testbin.NewCache(dir),
	}
	err := testbin.Build(map[string]string{
		b.host: "./cmd/host", b.testcap: "./test/plugins/testcap", b.kv: "./examples/plugins/kv", b.probe: "./test/packs/probe",
	})
	return b, err
}

var bin *bins

func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m, "wophost-integration-", func(dir string) (err error) {
		bin, err = buildBinaries(dir)
		return err
	}))
}

// binary builds the package pkg (such as "./plugins/mcp") once for the
// whole test binary and returns its path.
func binary(t testing.TB, pkg string) string {
	t.Helper()
	return bin.cache.MustBinary(t, pkg)
}

// probePack lays out the probe pack (pack.json and binary) in a fresh
// directory and returns it.
func probePack(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "probe")
	if err := testbin.LayOutPack("test/packs/probe", bin.probe, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeConfig writes host.hcl in a fresh directory. The text is a format
// string; %[1]s is the directory holding the test binaries.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	return writeConfigAsIs(t, strings.ReplaceAll(text, "BIN", bin.dir))
}

// writeConfigAsIs writes text as a host config in a fresh directory,
// replacing nothing: for a config holding random values (keys), in which
// "BIN" may occur by chance.
func writeConfigAsIs(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "host.hcl")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// result is one run of the host binary.
type result struct {
	stdout, stderr string
	code           int
}

// runHost runs the host binary with args and waits for it.
func runHost(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.host, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	err := cmd.Run()
	res := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run host %v: %v", args, err)
	}
	return res
}

// writeJunkPlugin writes an executable that prints junk where the
// handshake should be, then stays until the host kills it, so that the
// host reads the junk line and never an early exit instead.
func writeJunkPlugin(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "junk")
	script := "#!/bin/sh\necho 'this is not a handshake'\nexec sleep 300\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}
