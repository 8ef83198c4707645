//go:build !linux

package procgroup

import "syscall"

// preparePlatform does nothing: only Linux hands out a descriptor of the
// child that can be waited on without reaping it.
func (l *Launch) preparePlatform(*syscall.SysProcAttr) {}

func (l *Launch) closePlatform() {}

// watch does nothing: the leader's exit is not watched, so LeaderExited
// is never closed and callers fall back to their time bounds.
func (g *Group) watch(int) {}
