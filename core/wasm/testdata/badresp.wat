;; A pack whose nodes answer malformed or edge-case response envelopes.
;; Nodes 0..6 answer the fixed texts below; "out-of-bounds" answers a pair
;; running past the end of memory; "oversize" and "at-limit" grow memory
;; past 16 MiB and answer (0, 16 MiB + 1) and (0, 16 MiB) bytes of zeros.
;; The (ptr, len) of every node id is at 16 + 8*i, of every fixed response
;; at 512 + 8*i, as little-endian i32s.
(module
  (memory (export "memory") 4)
  (data (i32.const 4000) "wat-badresp")
  (data (i32.const 16) "\00\04\00\00\08\00\00\00\20\04\00\00\0f\00\00\00\40\04\00\00\09\00\00\00\60\04\00\00\0e\00\00\00\80\04\00\00\0c\00\00\00\a0\04\00\00\06\00\00\00\c0\04\00\00\09\00\00\00\e0\04\00\00\0d\00\00\00\00\05\00\00\08\00\00\00\20\05\00\00\08\00\00\00")
  (data (i32.const 512) "\00\08\00\00\10\00\00\00\80\08\00\00\16\00\00\00\00\09\00\00\17\00\00\00\80\09\00\00\2c\00\00\00\00\0a\00\00\17\00\00\00\80\0a\00\00\58\00\00\00\00\0b\00\00\37\00\00\00")
  (data (i32.const 1024) "not-json")
  (data (i32.const 1056) "unknown-outcome")
  (data (i32.const 1088) "no-output")
  (data (i32.const 1120) "failed-no-code")
  (data (i32.const 1152) "no-interrupt")
  (data (i32.const 1184) "failed")
  (data (i32.const 1216) "suspended")
  (data (i32.const 1248) "out-of-bounds")
  (data (i32.const 1280) "oversize")
  (data (i32.const 1312) "at-limit")
  (data (i32.const 2048) "this is not json")
  (data (i32.const 2176) "{\"outcome\":\"exploded\"}")
  (data (i32.const 2304) "{\"outcome\":\"completed\"}")
  (data (i32.const 2432) "{\"outcome\":\"failed\",\"error\":{\"message\":\"x\"}}")
  (data (i32.const 2560) "{\"outcome\":\"suspended\"}")
  (data (i32.const 2688) "{\"outcome\":\"failed\",\"error\":{\"code\":\"bad_input\",\"message\":\"no\",\"details\":{\"field\":\"x\"}}}")
  (data (i32.const 2816) "{\"outcome\":\"suspended\",\"interrupt\":{\"kind\":\"approval\"}}")

  (func (export "openwop_alloc") (param $n i32) (result i32)
    i32.const 65536)

  (func (export "openwop_free") (param i32 i32))

  (func (export "openwop_abi_version") (result i32)
    i32.const 1)

  (func (export "openwop_pack_name") (result i32 i32)
    i32.const 4000
    i32.const 11)

  (func (export "openwop_node_count") (result i32)
    i32.const 10)

  (func (export "openwop_node_id_at") (param $i i32) (result i32 i32)
    local.get $i
    i32.const 8
    i32.mul
    i32.load offset=16
    local.get $i
    i32.const 8
    i32.mul
    i32.load offset=20)

  (func (export "openwop_node_invoke") (param $node i32) (param $req i32) (param $len i32) (result i32 i32)
    local.get $node
    i32.const 7
    i32.lt_u
    if
      local.get $node
      i32.const 8
      i32.mul
      i32.load offset=512
      local.get $node
      i32.const 8
      i32.mul
      i32.load offset=516
      return
    end
    local.get $node
    i32.const 7
    i32.eq
    if
      memory.size
      i32.const 16
      i32.shl
      i32.const 6
      i32.sub
      i32.const 100
      return
    end
    i32.const 258
    memory.size
    i32.sub
    memory.grow
    drop
    i32.const 0
    i32.const 16777216
    local.get $node
    i32.const 8
    i32.eq
    i32.add))
