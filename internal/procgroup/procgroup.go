// Package procgroup starts a child process as the leader of a process
// group of its own and ends that group as a whole: whatever a plugin, a
// pack or an MCP server spawns goes with it, and no descendant it leaves
// behind can keep the pipes the host reads from open.
//
// A group also ends when its leader exits: the leader is the program the
// host started, and what it leaves running is no longer supervised by
// anyone. On Linux the leader's exit is seen through a pidfd the moment it
// happens, even while a descendant still holds the leader's stdout.
package procgroup

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
)

// Launch is a command prepared to lead a process group.
type Launch struct {
	cmd *exec.Cmd
	// pidfd is where the kernel puts a descriptor of the started
	// process; -1 where there is none.
	pidfd int
}

// Prepare makes cmd, which must not have started, lead a new process
// group when it starts. Call Started once it has.
func Prepare(cmd *exec.Cmd) *Launch {
	l := &Launch{cmd: cmd, pidfd: -1}
	attr := cmd.SysProcAttr
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Setpgid = true
	attr.Pgid = 0
	l.preparePlatform(attr)
	cmd.SysProcAttr = attr
	return l
}

// Started returns the group of the started command, or nil when it never
// started. Call it in the goroutine that called cmd.Start, or after
// synchronising with it: cmd.Process is written there.
func (l *Launch) Started() *Group {
	if l.cmd.Process == nil {
		l.closePlatform()
		return nil
	}
	g := &Group{pid: l.cmd.Process.Pid, exited: make(chan struct{})}
	g.watch(l.pidfd)
	l.pidfd = -1
	return g
}

// Group is a started process group, named by its leader's pid.
type Group struct {
	pid int
	// exited is closed once the leader has exited and the rest of the
	// group has been killed.
	exited chan struct{}

	releaseOnce sync.Once
	// release stops the watch of the leader; nil when there is none.
	release func()
}

// PID returns the leader's pid, which is also the group's id.
func (g *Group) PID() int { return g.pid }

// Kill sends SIGKILL to every process of the group. A group that is
// already gone is not an error.
func (g *Group) Kill() error { return Kill(g.pid) }

// LeaderExited is closed once the leader has exited; by then SIGKILL has
// been sent to the rest of the group. Where the leader's exit cannot be
// watched (no pidfd) it is never closed, and callers bound their waits.
func (g *Group) LeaderExited() <-chan struct{} { return g.exited }

// Release stops watching the leader and frees what the watch holds. Kill
// still works afterwards; LeaderExited is no longer closed if it was not
// already.
func (g *Group) Release() {
	g.releaseOnce.Do(func() {
		if g.release != nil {
			g.release()
		}
	})
}

// Kill sends SIGKILL to process group pgid. A group that is already gone
// is not an error.
func Kill(pgid int) error {
	if pgid <= 0 {
		return fmt.Errorf("kill process group %d: not a process group id", pgid)
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group %d: %w", pgid, err)
	}
	return nil
}
