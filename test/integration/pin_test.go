package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wophost/wophost/test/testbin"
)

// sha256File returns the hex sha256 of the file at path.
func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// A pinned plugin binary replaced while the host runs is refused when the
// host restarts the plugin after a crash: go-plugin's check just before
// exec fails, and the host's error names the pinned and the actual sum.
func TestPinMismatchAtRestartNamesBothSums(t *testing.T) {
	dir := t.TempDir()
	plugin := filepath.Join(dir, "pinned")
	copyExecutable(t, bin.testcap, plugin, 0o755)
	pin := sha256File(t, plugin)
	cfg := writeConfig(t, `host {
  http { listen = "127.0.0.1:0" }
}
capability "pinned" {
  plugin = "`+plugin+`"
  sha256 = "`+pin+`"
}
`)
	d := startServe(t, cfg)
	var pid int
	for _, p := range testbin.Processes() {
		if p.PPID == d.cmd.Process.Pid && strings.Contains(p.Command, "pinned") && p.State != "Z" {
			pid = p.PID
		}
	}
	if pid == 0 {
		t.Fatalf("no plugin process under host serve:\n%s", d.log())
	}

	// Replace the binary the way an upgrade does: a new file renamed over
	// the old one.
	next := filepath.Join(dir, "next")
	copyExecutable(t, bin.kv, next, 0o755)
	actual := sha256File(t, next)
	if err := os.Rename(next, plugin); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitForLog(t, "plugin restart failed")
	line := grepLines(d.log(), "plugin restart failed")
	for _, want := range []string{"expected " + pin, "actual " + actual, plugin} {
		if !strings.Contains(line, want) {
			t.Errorf("the failed restart's log line lacks %q:\n%s", want, line)
		}
	}
	if strings.Contains(line, "checksums did not match") {
		t.Errorf("the log still has go-plugin's bare error:\n%s", line)
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("host serve exit %d after SIGTERM", code)
	}
}
