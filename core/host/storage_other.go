//go:build !(linux || darwin || freebsd)

package host

// statSpace is not available here: the state directory is judged by
// its writes and the write probe alone.
func statSpace(string) (space, error) { return space{}, errNoStatfs }
