;; A well-formed pack whose (ptr, len) pairs are multi-value results.
;; Node "echo" answers the request envelope it was given as its output;
;; node "counter" bumps a global and a byte of memory (at 512) and answers
;; their sum less one, so a reused instance, or a reused memory not cleared,
;; would answer more than 1.
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (global $count (mut i32) (i32.const 0))
  (data (i32.const 16) "wat-good")
  (data (i32.const 32) "echo")
  (data (i32.const 48) "counter")
  (data (i32.const 64) "{\"outcome\":\"completed\",\"output\":")
  (data (i32.const 128) "{\"outcome\":\"completed\",\"output\":{\"count\":0}}")

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

  (func (export "openwop_abi_version") (result i32)
    i32.const 1)

  (func (export "openwop_pack_name") (result i32 i32)
    i32.const 16
    i32.const 8
    call $copy)

  (func (export "openwop_node_count") (result i32)
    i32.const 2)

  (func (export "openwop_node_id_at") (param $i i32) (result i32 i32)
    local.get $i
    i32.eqz
    if
      i32.const 32
      i32.const 4
      call $copy
      return
    end
    i32.const 48
    i32.const 7
    call $copy)

  (func (export "openwop_node_invoke") (param $node i32) (param $req i32) (param $len i32) (result i32 i32)
    (local $p i32)
    local.get $node
    i32.eqz
    if
      local.get $len
      i32.const 33
      i32.add
      call $alloc
      local.tee $p
      i32.const 64
      i32.const 32
      memory.copy
      local.get $p
      i32.const 32
      i32.add
      local.get $req
      local.get $len
      memory.copy
      local.get $p
      local.get $len
      i32.add
      i32.const 32
      i32.add
      i32.const 125
      i32.store8
      local.get $p
      local.get $len
      i32.const 33
      i32.add
      return
    end
    global.get $count
    i32.const 1
    i32.add
    global.set $count
    i32.const 512
    i32.const 512
    i32.load8_u
    i32.const 1
    i32.add
    i32.store8
    i32.const 128
    i32.const 44
    call $copy
    drop
    local.set $p
    local.get $p
    i32.const 41
    i32.add
    global.get $count
    i32.const 512
    i32.load8_u
    i32.add
    i32.const 47
    i32.add
    i32.store8
    local.get $p
    i32.const 44))
