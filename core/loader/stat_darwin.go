package loader

import (
	"fmt"
	"syscall"
)

// statIdentity is the identity FileIdentity reports for st; Darwin names
// the times of a Stat_t apart from Linux.
func statIdentity(st *syscall.Stat_t) string {
	return fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d", st.Dev, st.Ino, st.Size,
		st.Mtimespec.Sec, st.Mtimespec.Nsec, st.Ctimespec.Sec, st.Ctimespec.Nsec)
}
