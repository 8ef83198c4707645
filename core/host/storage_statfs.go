//go:build linux || darwin || freebsd

package host

import "golang.org/x/sys/unix"

// statSpace asks the file system holding dir for its free space and
// inodes.
func statSpace(dir string) (space, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return space{}, err
	}
	return space{
		avail:      uint64(st.Bavail) * uint64(st.Bsize),
		freeFiles:  uint64(st.Ffree),
		filesKnown: st.Files > 0,
	}, nil
}
