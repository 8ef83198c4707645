//go:build unix

package wasm

import "golang.org/x/sys/unix"

// reserve maps n bytes of zeroed memory that no other use shares, backed
// by the system only where they are touched, and returns them with the
// function that unmaps them.
func reserve(n uint64) ([]byte, func(), error) {
	if n == 0 || n > maxMemory32 {
		return nil, nil, errNoReservation
	}
	b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { _ = unix.Munmap(b) }, nil
}
