;; The pack community.wophost.wasmabi, written by hand for the host's
;; tests: well formed in every way but one, its openwop_abi_version()
;; answers 999, an ABI no host serves. Pairs are multi-value results.
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (data (i32.const 16) "community.wophost.wasmabi")
  (data (i32.const 48) "wasmabi.run")
  (data (i32.const 64) "{\"outcome\":\"completed\",\"output\":{}}")

  (func $alloc (export "openwop_alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (local.get $p))

  (func (export "openwop_free") (param i32 i32))

  (func $copy (param $src i32) (param $n i32) (result i32 i32)
    (local $p i32)
    (local.set $p (call $alloc (local.get $n)))
    (memory.copy (local.get $p) (local.get $src) (local.get $n))
    (local.get $p) (local.get $n))

  (func (export "openwop_abi_version") (result i32) (i32.const 999))
  (func (export "openwop_pack_name") (result i32 i32) (call $copy (i32.const 16) (i32.const 25)))
  (func (export "openwop_node_count") (result i32) (i32.const 1))
  (func (export "openwop_node_id_at") (param i32) (result i32 i32) (call $copy (i32.const 48) (i32.const 11)))
  (func (export "openwop_node_invoke") (param i32 i32 i32) (result i32 i32)
    (call $copy (i32.const 64) (i32.const 35))))
