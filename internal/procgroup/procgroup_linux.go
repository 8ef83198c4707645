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

// watch waits for the leader's exit (a pidfd turns readable when its
// process exits, zombie or reaped), kills what is left of the group and
// closes g.exited. Without a usable pidfd there is no watch: an old
// kernel, or a sandbox that refuses the system calls.
//
// The pidfd stays blocking: os/exec waits on a duplicate of it, which
// shares its file status flags, and a non-blocking descriptor would make
// that wait fail with EAGAIN while the process still runs. So the watch
// polls it on a thread of its own, beside a pipe that Release closes to
// end the watch.
func (g *Group) watch(pidfd int) {
	if pidfd < 0 {
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		_ = syscall.Close(pidfd)
		return
	}
	g.release = func() { _ = w.Close() }
	go func() {
		defer syscall.Close(pidfd)
		defer r.Close()
		fds := []unix.PollFd{
			{Fd: int32(pidfd), Events: unix.POLLIN},
			{Fd: int32(r.Fd()), Events: unix.POLLIN},
		}
		for {
			if _, err := unix.Poll(fds, -1); err != nil {
				if err == unix.EINTR {
					continue
				}
				return
			}
			if fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0 {
				_ = g.Kill()
				close(g.exited)
				return
			}
			if fds[1].Revents != 0 {
				return // released
			}
		}
	}()
}
