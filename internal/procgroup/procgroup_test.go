package procgroup

import (
	"bufio"
	"io"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/test/testbin"
)

// startLeader starts a shell that leaves a child holding its stdout and
// waits; it returns the command, its group and the child's pid.
func startLeader(t *testing.T) (*exec.Cmd, *Group, io.Reader, int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "sleep 300 & echo $!; wait")
	launch := Prepare(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := launch.Started()
	if g == nil {
		t.Fatal("Started returned nil for a started command")
	}
	t.Cleanup(func() {
		_ = g.Kill()
		g.Release()
	})
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read the child's pid: %v", err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("child pid %q: %v", line, err)
	}
	// Should the group be wrong, the processes still go.
	t.Cleanup(func() {
		_ = syscall.Kill(child, syscall.SIGKILL)
		_ = cmd.Process.Kill()
	})
	return cmd, g, r, child
}

func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(testbin.Group(pgid)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("group %d survived: %+v", pgid, testbin.Group(pgid))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCommandLeadsItsOwnGroup(t *testing.T) {
	cmd, g, _, child := startLeader(t)
	if g.PID() != cmd.Process.Pid {
		t.Errorf("group id %d, want the leader's pid %d", g.PID(), cmd.Process.Pid)
	}
	var found bool
	for _, p := range testbin.Group(g.PID()) {
		if p.PID == child {
			found = true
		}
	}
	if !found {
		t.Errorf("the leader's child %d is not in group %d: %+v", child, g.PID(), testbin.Group(g.PID()))
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	waitGroupGone(t, g.PID())
	_ = cmd.Wait()
	// Killing a group that is gone is not an error.
	if err := g.Kill(); err != nil {
		t.Errorf("Kill of a gone group: %v", err)
	}
}

// When the leader dies, the child that holds its stdout goes too, so the
// reader sees the end of the output.
func TestLeaderExitEndsTheGroup(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the leader's exit is watched on Linux only")
	}
	cmd, g, out, _ := startLeader(t)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.LeaderExited():
	case <-time.After(10 * time.Second):
		t.Fatal("the leader's exit was not seen within 10s")
	}
	waitGroupGone(t, g.PID())
	eof := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, out)
		eof <- err
	}()
	select {
	case err := <-eof:
		if err != nil {
			t.Errorf("reading the output: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the output did not end after the group was killed")
	}
	_ = cmd.Wait()
}

// After Release the group can still be killed.
func TestKillAfterRelease(t *testing.T) {
	cmd, g, _, _ := startLeader(t)
	g.Release()
	g.Release()
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	waitGroupGone(t, g.PID())
	_ = cmd.Wait()
}

func TestStartedWithoutAProcess(t *testing.T) {
	cmd := exec.Command("/nonexistent/program")
	launch := Prepare(cmd)
	if err := cmd.Start(); err == nil {
		t.Fatal("a missing program started")
	}
	if g := launch.Started(); g != nil {
		t.Errorf("Started = %+v, want nil for a command that did not start", g)
	}
}

func TestKillRefusesWhatIsNotAGroup(t *testing.T) {
	for _, pgid := range []int{0, -1} {
		if err := Kill(pgid); err == nil {
			t.Errorf("Kill(%d) succeeded; it would signal the caller's own group or every process", pgid)
		}
	}
}

// The watch leaves the command's own wait alone: os/exec waits on a
// duplicate of the watched pidfd, so Wait must still block until the
// process exits rather than fail at once.
func TestWaitStillWaitsWhileWatched(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "read line")
	launch := Prepare(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := launch.Started()
	defer g.Release()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		t.Fatalf("Wait returned while the process still ran: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	stdin.Close() // the shell reads end of file and exits 1
	if err := <-waited; err == nil || !strings.Contains(err.Error(), "exit status 1") {
		t.Fatalf("Wait after the process exited: %v, want exit status 1", err)
	}
	select {
	case <-g.LeaderExited():
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not see the leader exit")
	}
}
