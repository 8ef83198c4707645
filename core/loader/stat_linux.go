package loader

import (
	"fmt"
	"syscall"
)

// statIdentity is the identity FileIdentity reports for st.
func statIdentity(st *syscall.Stat_t) string {
	return fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d", st.Dev, st.Ino, st.Size,
		st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
}
