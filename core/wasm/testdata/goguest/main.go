//go:build wasip1

// Command goguest is a pack written in Go for the runtime's tests, built
// with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared (a reactor). Its node
// "random" answers 16 bytes read from crypto/rand, which reads WASI's
// random_get, and prints one line to stdout.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"unsafe"
)

func main() {}

// live keeps the buffers handed to the host until it frees them.
var live = map[uint32][]byte{}

//go:wasmexport openwop_alloc
func alloc(size uint32) uint32 {
	b := make([]byte, size+1)
	ptr := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	live[ptr] = b
	return ptr
}

//go:wasmexport openwop_free
func free(ptr, _ uint32) {
	delete(live, ptr)
}

// pair hands b to the host as a packed (ptr, len).
func pair(b []byte) uint64 {
	ptr := alloc(uint32(len(b)))
	copy(live[ptr], b)
	return uint64(ptr) | uint64(len(b))<<32
}

//go:wasmexport openwop_abi_version
func abiVersion() int32 { return 1 }

//go:wasmexport openwop_pack_name
func packName() uint64 { return pair([]byte("go-guest")) }

//go:wasmexport openwop_node_count
func nodeCount() int32 { return 1 }

//go:wasmexport openwop_node_id_at
func nodeIDAt(int32) uint64 { return pair([]byte("random")) }

//go:wasmexport openwop_node_invoke
func nodeInvoke(_ int32, req, n uint32) uint64 {
	delete(live, req)
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	fmt.Println("goguest: invoked")
	return pair(fmt.Appendf(nil, `{"outcome":"completed","output":{"random":%q}}`, hex.EncodeToString(b[:])))
}
