//go:build linux

package procutil

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// helperEnv selects what the test binary does when a test starts it: the
// watched process or the parent that starts it.
const helperEnv = "PROCUTIL_TEST_HELPER"

// TestMain runs the helpers of TestWatchParentExitsCleanlyOnABrokenStderr.
func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "watched":
		watched()
	case "parent":
		parent()
	}
	os.Exit(m.Run())
}

// watched is a process like a plugin: it watches its parent and, once it
// is gone, logs to stderr, runs its exit hook (which writes the marker
// file) and exits.
func watched() {
	marker := os.Getenv("PROCUTIL_TEST_MARKER")
	WatchParent(Logger("watched"), func() {
		_ = os.WriteFile(marker, []byte("exited cleanly"), 0o600)
	})
	// The watch knows its parent now; the parent may die.
	os.Stdout.WriteString("watching\n")
	select {}
}

// parent starts the watched process with its stderr a pipe only this
// process reads, as the host reads a plugin's, prints its pid and waits
// to be killed: the pipe breaks with it.
func parent() {
	r, w, err := os.Pipe()
	if err != nil {
		os.Exit(1)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=watched")
	cmd.Stderr = w
	ready, err := cmd.StdoutPipe()
	if err != nil {
		os.Exit(1)
	}
	if err := cmd.Start(); err != nil {
		os.Exit(1)
	}
	w.Close()
	if _, err := bufio.NewReader(ready).ReadString('\n'); err != nil {
		os.Exit(1)
	}
	os.Stdout.WriteString(strconv.Itoa(cmd.Process.Pid) + "\n")
	_ = r
	select {}
}

// Once the host is gone, the plugin's stderr is a broken pipe: the
// watch's last log line must not kill the process with SIGPIPE (Go's
// runtime raises it for a write to fd 2) before its exit hook runs.
func TestWatchParentExitsCleanlyOnABrokenStderr(t *testing.T) {
	// Orphans reparent to this process rather than to init, so that it
	// can wait for the watched process once its parent is killed.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	marker := filepath.Join(t.TempDir(), "marker")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=parent", "PROCUTIL_TEST_MARKER="+marker)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("the parent printed no pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	// The parent dies as a host killed with SIGKILL does.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	// The watch polls every half second; the process then logs, runs its
	// hook and exits 3, or dies of SIGPIPE at the log line. This test's
	// process is its subreaper, so it is this process's to wait for.
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatalf("wait for the watched process: %v", err)
	}
	if ws.Signaled() {
		t.Fatalf("the watched process died of %v once its parent was gone, want exit status 3", ws.Signal())
	}
	if ws.ExitStatus() != 3 {
		t.Errorf("the watched process exited %d, want 3", ws.ExitStatus())
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "exited cleanly" {
		t.Errorf("the exit hook did not run: %q, %v", b, err)
	}
}
