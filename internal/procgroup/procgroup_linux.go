package procgroup

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// preparePlatform asks clone for a pidfd of the child. Taken at clone
// time, it names exactly the process the host started: opened later, the
// pid might already belong to another process.
func (l *Launch) preparePlatform(attr *syscall.SysProcAttr) {
	attr.PidFD = &l.pidfd
}

func (l *Launch) closePlatform() {
	if l.pidfd >= 0 {
		_ = syscall.Close(l.pidfd)
		l.pidfd = -1
	}
}

// watch waits for the leader's exit on the runtime's poller (a pidfd turns
// readable when its process exits, zombie or reaped), kills what is left
// of the group and closes g.exited. Without a usable pidfd there is no
// watch: an old kernel, or a sandbox that refuses the system calls.
func (g *Group) watch(pidfd int) {
	if pidfd < 0 {
		return
	}
	// Non-blocking, the descriptor joins the runtime's poller, so the
	// wait below parks a goroutine rather than a thread, and Close ends it.
	if err := syscall.SetNonblock(pidfd, true); err != nil {
		_ = syscall.Close(pidfd)
		return
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return
	}
	g.release = func() { _ = f.Close() }
	go func() {
		// Read calls leaderGone, and while it answers false waits until
		// the poller reports the descriptor readable, then asks again.
		// It fails once Release has closed the descriptor, or when the
		// poller does not take it.
		if err := rc.Read(leaderGone); err != nil {
			return
		}
		_ = g.Kill()
		close(g.exited)
	}()
}

// leaderGone reports whether the process behind pidfd fd has exited,
// without waiting.
func leaderGone(fd uintptr) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP) != 0
}
