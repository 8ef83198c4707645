//go:build linux

package integration

import "golang.org/x/sys/unix"

// landlockABI returns the Landlock ABI version the kernel offers, or why
// it offers none (ENOSYS: no Landlock; EOPNOTSUPP: built but disabled).
// It asks the kernel as go-landlock's LandlockGetABIVersion does, without
// the thread-synchronisation package that one brings along.
func landlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}
