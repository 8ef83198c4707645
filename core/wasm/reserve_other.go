//go:build !unix

package wasm

// reserve has no system call to map memory with here: memories are Go
// slices.
func reserve(uint64) ([]byte, func(), error) { return nil, nil, errNoReservation }
