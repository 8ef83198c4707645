//go:build wasip1

package wasmpack

import (
	"runtime"
	"unsafe"

	"github.com/wophost/wophost/sdk/wop"
)

// The exports are functions of the package, so the pack they serve and
// the buffers they hand out live in package variables: Serve sets served
// once, in the module's initialization, before the host calls any export.
var (
	served *server
	memory = newAllocator(addrOf)
)

// Serve makes p the pack the module's exports serve. Call it from the
// pack's init function: a WebAssembly reactor's main never runs. It
// panics, which fails the module's initialization and so the host's load
// of it, when p does not hold together (the manifest has no name, a node
// of the manifest has no handler, or a handler no node of the manifest)
// or when it is called a second time.
func Serve(p *Pack) {
	if served != nil {
		panic("wasmpack: Serve called twice")
	}
	served = mustServer(p)
}

// pack is the served pack; a module whose init did not call Serve traps
// on its first export call, which fails the host's load.
func pack() *server {
	if served == nil {
		panic("wasmpack: the pack's init did not call wasmpack.Serve")
	}
	return served
}

// addrOf is the address of b's first byte in linear memory.
func addrOf(b []byte) uint32 {
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// strAddr is the address of s's first byte, 0 for an empty string.
func strAddr(s string) uint32 {
	return uint32(uintptr(unsafe.Pointer(unsafe.StringData(s))))
}

//go:wasmexport openwop_abi_version
func exportABIVersion() int32 { return ABIVersion }

//go:wasmexport openwop_pack_name
func exportPackName() uint64 { return memory.result([]byte(pack().name)) }

//go:wasmexport openwop_node_count
func exportNodeCount() int32 { return int32(len(pack().ids)) }

//go:wasmexport openwop_node_id_at
func exportNodeIDAt(index int32) uint64 {
	id, ok := pack().nodeID(index)
	if !ok {
		return 0
	}
	return memory.result([]byte(id))
}

//go:wasmexport openwop_alloc
func exportAlloc(size int32) uint32 { return memory.alloc(size) }

//go:wasmexport openwop_free
func exportFree(ptr, size uint32) { memory.free(ptr) }

//go:wasmexport openwop_node_invoke
func exportNodeInvoke(index int32, reqPtr, reqLen uint32) uint64 {
	req, ok := memory.take(reqPtr, reqLen)
	if !ok {
		return memory.result(failed(wop.Errorf(wop.CodeValidation,
			"the request (%d bytes at %#x) is not in a buffer from openwop_alloc", reqLen, reqPtr)))
	}
	return memory.result(pack().invoke(index, req, wasmHost{}))
}

//go:wasmimport openwop openwop_channel_read
func importChannelRead(namePtr, nameLen uint32) uint64

//go:wasmimport openwop openwop_channel_write
func importChannelWrite(namePtr, nameLen, valPtr, valLen uint32) int32

//go:wasmimport openwop openwop_variable_get
func importVariableGet(keyPtr, keyLen uint32) uint64

//go:wasmimport openwop openwop_variable_set
func importVariableSet(keyPtr, keyLen, valPtr, valLen uint32) int32

//go:wasmimport openwop openwop_interrupt
func importInterrupt(payloadPtr, payloadLen uint32) uint64

//go:wasmimport openwop openwop_log
func importLog(level int32, msgPtr, msgLen uint32)

//go:wasmimport openwop openwop_now_ms
func importNowMs() int64

//go:wasmimport openwop openwop_random
func importRandom(outPtr, n uint32)

//go:wasmimport wophost wophost_call
func importCall(famPtr, famLen, methodPtr, methodLen, payloadPtr, payloadLen uint32) uint64

//go:wasmimport wophost wophost_advertised
func importAdvertised() uint64

// wasmHost is the host through the module's imports.
type wasmHost struct{}

var _ imports = wasmHost{}

// answer reads an import's pair result, which the host wrote into a
// buffer from openwop_alloc; (0, 0) is none.
func answer(p uint64) ([]byte, bool) {
	ptr, n := unpair(p)
	if ptr == 0 && n == 0 {
		return nil, false
	}
	return memory.take(ptr, n)
}

func (wasmHost) channelRead(name string) ([]byte, bool) {
	r := importChannelRead(strAddr(name), uint32(len(name)))
	runtime.KeepAlive(name)
	return answer(r)
}

func (wasmHost) channelWrite(name string, value []byte) int32 {
	return write(importChannelWrite, name, value)
}

// write calls imp, a write import, with name and value.
func write(imp func(namePtr, nameLen, valPtr, valLen uint32) int32, name string, value []byte) int32 {
	st := imp(strAddr(name), uint32(len(name)), addrOf(value), uint32(len(value)))
	runtime.KeepAlive(name)
	runtime.KeepAlive(value)
	return st
}

func (wasmHost) variableGet(key string) ([]byte, bool) {
	r := importVariableGet(strAddr(key), uint32(len(key)))
	runtime.KeepAlive(key)
	return answer(r)
}

func (wasmHost) variableSet(key string, value []byte) int32 {
	return write(importVariableSet, key, value)
}

func (wasmHost) interrupt(payload []byte) ([]byte, bool) {
	r := importInterrupt(addrOf(payload), uint32(len(payload)))
	runtime.KeepAlive(payload)
	return answer(r)
}

func (wasmHost) log(level int32, msg string) {
	importLog(level, strAddr(msg), uint32(len(msg)))
	runtime.KeepAlive(msg)
}

func (wasmHost) nowMs() int64 { return importNowMs() }

func (wasmHost) random(p []byte) {
	importRandom(addrOf(p), uint32(len(p)))
	runtime.KeepAlive(p)
}

func (wasmHost) call(family, method string, payload []byte) []byte {
	r := importCall(strAddr(family), uint32(len(family)), strAddr(method), uint32(len(method)), addrOf(payload), uint32(len(payload)))
	runtime.KeepAlive(family)
	runtime.KeepAlive(method)
	runtime.KeepAlive(payload)
	b, _ := answer(r)
	return b
}

func (wasmHost) advertised() []byte {
	b, _ := answer(importAdvertised())
	return b
}
