package integration

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/test/testbin"
)

// pluginSockets lists the go-plugin sockets (named plugin*) in dir.
func pluginSockets(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "plugin") && e.Type()&os.ModeSocket != 0 {
			out = append(out, e.Name())
		}
	}
	return out
}

// childOf returns the pid of the live child of parent whose command
// contains name, or 0.
func childOf(parent int, name string) int {
	for _, p := range testbin.Processes() {
		if p.PPID == parent && p.State != "Z" && strings.Contains(p.Command, name) {
			return p.PID
		}
	}
	return 0
}

// A plugin and a pack killed with SIGKILL cannot remove the unix sockets
// they listened on; the host removes them when it stops what is left of
// the process, so neither the crash and restart nor the stop that follows
// leaves a socket of the host behind.
func TestKilledProcessesLeaveNoSockets(t *testing.T) {
	tmp := t.TempDir()
	cmd := exec.Command(bin.host, "--config", serveConfig(t, "", ""), "serve")
	// Every socket of the host and its children goes to tmp.
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	d := startServeCommand(t, cmd)
	if len(pluginSockets(t, tmp)) == 0 {
		t.Fatalf("no plugin socket in %s: the test would prove nothing", tmp)
	}

	for _, name := range []string{"testcap", "probe"} {
		pid := childOf(d.cmd.Process.Pid, name)
		if pid == 0 {
			t.Fatalf("no %s process under host serve:\n%s", name, d.log())
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	// Both come back: the restarted plugin logs "capability ready" again.
	d.waitForLog(t, "pack restarted")
	deadline := time.Now().Add(time.Minute)
	for strings.Count(d.log(), "capability ready") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the plugin was not restarted:\n%s", d.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("host serve exit %d after SIGTERM", code)
	}
	if left := pluginSockets(t, tmp); len(left) > 0 {
		t.Errorf("sockets left in %s after the kills and the stop: %v", tmp, left)
	}
}
