// Package wasmpack is what a pack author imports to write a node pack that
// runs as a WebAssembly module inside the host, rather than as a process of
// its own. The nodes have the shape of sdk/pack's: a Pack maps each typeId
// of the embedded pack.json to a Node, and a node reaches the host through
// its Ctx.
//
// # Building
//
// A pack is a package main that calls Serve from its init function, and is
// built as a WebAssembly reactor (Go 1.24 or later):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o pack.wasm .
//
// A reactor's main never runs: the host instantiates the module, calls its
// _initialize export (which runs the package init functions, Serve among
// them) and then calls the exports of OpenWOP's WebAssembly ABI v1, which
// this package provides: openwop_abi_version, openwop_pack_name,
// openwop_node_count, openwop_node_id_at, openwop_alloc, openwop_free and
// openwop_node_invoke. Every (ptr, len) result is returned in the ABI's
// packed form, one i64 with the pointer in its low 32 bits, since a Go
// function exported to WebAssembly returns one value.
//
// The package also builds for every other platform, with the same API, so
// that a pack's code can be vetted and unit-tested natively; there Serve
// only checks the pack.
//
// # What the host provides
//
// The imports of the ABI's "openwop" module back Ctx's methods: Now
// (openwop_now_ms), Random (openwop_random), Variable and SetVariable,
// ReadChannel and WriteChannel, Interrupt, and the Logger (openwop_log).
// The host-service calls (Ctx.Call and the family clients AIEnvelope,
// PromptLibrary, AgentRuntime and MCP) go through wophost's extension, the
// "wophost" import module (wophost_call and wophost_advertised), which is
// no part of OpenWOP's ABI. The Go runtime itself imports
// wasi_snapshot_preview1 (its clock, its random seed, stdout and stderr);
// the host supplies those too.
//
// # Determinism
//
// A run is replayed by running the node again with the host answering its
// imports as they were answered the first time. A node is replayable when
// everything it depends on comes through its Ctx: the time from Ctx.Now,
// random bytes from Ctx.Random, state from variables and channels, other
// services from Ctx.Call. time.Now and crypto/rand read WASI's clock and
// random source, which the host does not record, so a node that uses them
// gives another answer on a replay. A module has no filesystem, network
// or environment of its own.
package wasmpack
