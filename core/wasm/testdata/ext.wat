;; A pack using wophost's vendor extension: its node "call" makes one
;; wophost_call (aiEnvelope.generate) and reads wophost_advertised, and
;; answers both as its output. wophost_call is declared with a multi-value
;; pair, wophost_advertised with a packed i64.
(module
  (import "wophost" "wophost_call" (func $call (param i32 i32 i32 i32 i32 i32) (result i32 i32)))
  (import "wophost" "wophost_advertised" (func $advertised (result i64)))
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (global $out (mut i32) (i32.const 0))
  (data (i32.const 16) "wat-ext")
  (data (i32.const 32) "call")
  (data (i32.const 40) "aiEnvelope")
  (data (i32.const 56) "generate")
  (data (i32.const 64) "{\"prompt\":\"hi\"}")
  (data (i32.const 96) "{\"outcome\":\"completed\",\"output\":{\"call\":")
  (data (i32.const 144) ",\"advertised\":")
  (data (i32.const 232) "}}")
  (data (i32.const 236) "null")
  (data (i32.const 240) "0123456789abcdef")

  (func $alloc (export "openwop_alloc") (param $n i32) (result i32)
    (local $p i32) (local $end i32) (local $need i32)
    global.get $heap
    local.set $p
    local.get $p
    local.get $n
    i32.add
    i32.const 7
    i32.add
    i32.const -8
    i32.and
    local.set $end
    local.get $end
    i32.const 65535
    i32.add
    i32.const 16
    i32.shr_u
    memory.size
    i32.sub
    local.tee $need
    i32.const 0
    i32.gt_s
    if
      local.get $need
      memory.grow
      i32.const -1
      i32.eq
      if
        i32.const 0
        return
      end
    end
    local.get $end
    global.set $heap
    local.get $p)

  (func (export "openwop_free") (param i32 i32))

  (func $copy (param $src i32) (param $len i32) (result i32 i32)
    (local $p i32)
    local.get $len
    call $alloc
    local.tee $p
    local.get $src
    local.get $len
    memory.copy
    local.get $p
    local.get $len)

  ;; $put appends len bytes at src to the output being built.
  (func $put (param $src i32) (param $len i32)
    global.get $out
    local.get $src
    local.get $len
    memory.copy
    global.get $out
    local.get $len
    i32.add
    global.set $out)

  ;; $putpair appends a JSON value the host answered, or null for (0, 0).
  (func $putpair (param $ptr i32) (param $len i32)
    local.get $len
    i32.eqz
    if
      i32.const 236
      i32.const 4
      call $put
      return
    end
    local.get $ptr
    local.get $len
    call $put)

  (func (export "openwop_abi_version") (result i32)
    i32.const 1)

  (func (export "openwop_pack_name") (result i32 i32)
    i32.const 16
    i32.const 7
    call $copy)

  (func (export "openwop_node_count") (result i32)
    i32.const 1)

  (func (export "openwop_node_id_at") (param $i i32) (result i32 i32)
    i32.const 32
    i32.const 4
    call $copy)

  (func (export "openwop_node_invoke") (param $node i32) (param $req i32) (param $len i32) (result i32 i32)
    (local $start i32) (local $packed i64)
    i32.const 65536
    call $alloc
    local.tee $start
    global.set $out
    i32.const 96
    i32.const 40
    call $put
    i32.const 40
    i32.const 10
    i32.const 56
    i32.const 8
    i32.const 64
    i32.const 15
    call $call
    call $putpair
    i32.const 144
    i32.const 14
    call $put
    call $advertised
    local.tee $packed
    i32.wrap_i64
    local.get $packed
    i64.const 32
    i64.shr_u
    i32.wrap_i64
    call $putpair
    i32.const 232
    i32.const 2
    call $put
    local.get $start
    global.get $out
    local.get $start
    i32.sub))
