;; A pack whose node "all" calls every openwop import once and answers, as
;; its output, what the host gave it. openwop_channel_read and
;; openwop_interrupt are declared with multi-value pairs,
;; openwop_variable_get with a packed i64, so both forms are exercised.
(module
  (import "openwop" "openwop_channel_read" (func $chan_read (param i32 i32) (result i32 i32)))
  (import "openwop" "openwop_channel_write" (func $chan_write (param i32 i32 i32 i32) (result i32)))
  (import "openwop" "openwop_variable_get" (func $var_get (param i32 i32) (result i64)))
  (import "openwop" "openwop_variable_set" (func $var_set (param i32 i32 i32 i32) (result i32)))
  (import "openwop" "openwop_interrupt" (func $interrupt (param i32 i32) (result i32 i32)))
  (import "openwop" "openwop_log" (func $log (param i32 i32 i32)))
  (import "openwop" "openwop_now_ms" (func $now (result i64)))
  (import "openwop" "openwop_random" (func $random (param i32 i32)))
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (global $out (mut i32) (i32.const 0))
  (data (i32.const 16) "wat-imports")
  (data (i32.const 32) "all")
  (data (i32.const 40) "in")
  (data (i32.const 44) "out")
  (data (i32.const 48) "42")
  (data (i32.const 52) "k")
  (data (i32.const 56) "k2")
  (data (i32.const 60) "\"v\"")
  (data (i32.const 64) "hello from wat")
  (data (i32.const 80) "{\"ask\":1}")
  (data (i32.const 96) "{\"outcome\":\"completed\",\"output\":{\"channel\":")
  (data (i32.const 144) ",\"variable\":")
  (data (i32.const 160) ",\"writeStatus\":")
  (data (i32.const 176) ",\"setStatus\":")
  (data (i32.const 192) ",\"now\":")
  (data (i32.const 200) ",\"random\":\"")
  (data (i32.const 216) "\",\"resume\":")
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

  ;; $puti appends v in decimal; digits are built backwards at 256..276.
  (func $puti (param $v i64)
    (local $i i32)
    i32.const 276
    local.set $i
    (loop $digit
      local.get $i
      i32.const 1
      i32.sub
      local.tee $i
      local.get $v
      i64.const 10
      i64.rem_u
      i32.wrap_i64
      i32.const 48
      i32.add
      i32.store8
      local.get $v
      i64.const 10
      i64.div_u
      local.tee $v
      i64.const 0
      i64.ne
      br_if $digit)
    local.get $i
    i32.const 276
    local.get $i
    i32.sub
    call $put)

  ;; $puthex appends len bytes at src as lower-case hex.
  (func $puthex (param $src i32) (param $len i32)
    (local $b i32)
    (block $done
      (loop $byte
        local.get $len
        i32.eqz
        br_if $done
        local.get $src
        i32.load8_u
        local.set $b
        global.get $out
        local.get $b
        i32.const 4
        i32.shr_u
        i32.const 240
        i32.add
        i32.load8_u
        i32.store8
        global.get $out
        local.get $b
        i32.const 15
        i32.and
        i32.const 240
        i32.add
        i32.load8_u
        i32.store8 offset=1
        global.get $out
        i32.const 2
        i32.add
        global.set $out
        local.get $src
        i32.const 1
        i32.add
        local.set $src
        local.get $len
        i32.const 1
        i32.sub
        local.set $len
        br $byte)))

  (func (export "openwop_abi_version") (result i32)
    i32.const 1)

  (func (export "openwop_pack_name") (result i32 i32)
    i32.const 16
    i32.const 11
    call $copy)

  (func (export "openwop_node_count") (result i32)
    i32.const 1)

  (func (export "openwop_node_id_at") (param $i i32) (result i32 i32)
    i32.const 32
    i32.const 3
    call $copy)

  (func (export "openwop_node_invoke") (param $node i32) (param $req i32) (param $len i32) (result i32 i32)
    (local $start i32) (local $packed i64)
    i32.const 65536
    call $alloc
    local.tee $start
    global.set $out
    i32.const 96
    i32.const 43
    call $put
    i32.const 40
    i32.const 2
    call $chan_read
    call $putpair
    i32.const 144
    i32.const 12
    call $put
    i32.const 52
    i32.const 1
    call $var_get
    local.tee $packed
    i32.wrap_i64
    local.get $packed
    i64.const 32
    i64.shr_u
    i32.wrap_i64
    call $putpair
    i32.const 160
    i32.const 15
    call $put
    i32.const 44
    i32.const 3
    i32.const 48
    i32.const 2
    call $chan_write
    i64.extend_i32_u
    call $puti
    i32.const 176
    i32.const 13
    call $put
    i32.const 56
    i32.const 2
    i32.const 60
    i32.const 3
    call $var_set
    i64.extend_i32_u
    call $puti
    i32.const 2
    i32.const 64
    i32.const 14
    call $log
    i32.const 192
    i32.const 7
    call $put
    call $now
    call $puti
    i32.const 300
    i32.const 8
    call $random
    i32.const 200
    i32.const 11
    call $put
    i32.const 300
    i32.const 8
    call $puthex
    i32.const 216
    i32.const 11
    call $put
    i32.const 80
    i32.const 9
    call $interrupt
    call $putpair
    i32.const 232
    i32.const 2
    call $put
    local.get $start
    global.get $out
    local.get $start
    i32.sub))
