package wasmpack

// pair packs a (ptr, len) result into the ABI's i64 form: the pointer in
// the low 32 bits, the length in the high 32 bits.
func pair(ptr, n uint32) uint64 {
	return uint64(n)<<32 | uint64(ptr)
}

// unpair splits a packed (ptr, len) result.
func unpair(p uint64) (ptr, n uint32) {
	return uint32(p), uint32(p >> 32)
}

// allocator holds the buffers handed out across the module's boundary:
// each stays reachable from Go, so the garbage collector neither frees nor
// reuses it, until it is freed. addr is a buffer's address in linear
// memory.
type allocator struct {
	bufs map[uint32][]byte
	addr func([]byte) uint32
}

func newAllocator(addr func([]byte) uint32) *allocator {
	return &allocator{bufs: map[uint32][]byte{}, addr: addr}
}

// alloc returns the address of a new zeroed buffer of size bytes, 0 for a
// negative size. A buffer of 0 bytes still has an address of its own.
func (a *allocator) alloc(size int32) uint32 {
	if size < 0 {
		return 0
	}
	b := make([]byte, size, max(size, 1))
	return a.keep(b)
}

// keep holds b until it is freed and returns its address.
func (a *allocator) keep(b []byte) uint32 {
	if cap(b) == 0 {
		b = make([]byte, 0, 1)
	}
	ptr := a.addr(b[:1])
	a.bufs[ptr] = b
	return ptr
}

// free lets the buffer at ptr go; an address not handed out is ignored,
// as freeing it twice is.
func (a *allocator) free(ptr uint32) {
	delete(a.bufs, ptr)
}

// take returns the n bytes the host wrote at ptr, into a buffer it had
// from alloc, and frees the buffer: the module owns what the host hands
// it. The bytes are false when ptr is no buffer handed out or n runs past
// its end.
func (a *allocator) take(ptr, n uint32) ([]byte, bool) {
	b, ok := a.bufs[ptr]
	if !ok || uint64(n) > uint64(len(b)) {
		return nil, false
	}
	delete(a.bufs, ptr)
	return b[:n], true
}

// result holds b for the host to read and returns it as a packed pair;
// the host frees it with openwop_free.
func (a *allocator) result(b []byte) uint64 {
	return pair(a.keep(b), uint32(len(b)))
}
