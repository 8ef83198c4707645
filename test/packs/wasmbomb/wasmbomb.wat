;; The pack community.wophost.wasmbomb, written by hand for the host's
;; tests. Node wasmbomb.bomb grows memory 1024 pages (64 MiB) at a time
;; until memory.grow answers -1, then traps: the module declares no
;; maximum, so only the host's cap stops it. Node wasmbomb.echo answers
;; the request envelope it was given as its output. Pairs are packed i64
;; (ptr in the low 32 bits, len in the high 32 bits).
(module
  (memory (export "memory") 16)
  (global $heap (mut i32) (i32.const 1024))
  (data (i32.const 16) "community.wophost.wasmbomb")
  (data (i32.const 48) "wasmbomb.bomb")
  (data (i32.const 64) "wasmbomb.echo")
  (data (i32.const 96) "{\"outcome\":\"completed\",\"output\":")

  ;; A bump allocator; nothing is ever freed within an instance.
  (func $alloc (export "openwop_alloc") (param $n i32) (result i32)
    (local $p i32) (local $end i32) (local $need i32)
    (local.set $p (global.get $heap))
    (local.set $end (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (local.set $need (i32.sub (i32.shr_u (i32.add (local.get $end) (i32.const 65535)) (i32.const 16)) (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then
        (if (i32.eq (memory.grow (local.get $need)) (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))

  (func (export "openwop_free") (param i32 i32))

  (func $pack (param $p i32) (param $n i32) (result i64)
    (i64.or (i64.extend_i32_u (local.get $p)) (i64.shl (i64.extend_i32_u (local.get $n)) (i64.const 32))))

  (func $copy (param $src i32) (param $n i32) (result i64)
    (local $p i32)
    (local.set $p (call $alloc (local.get $n)))
    (memory.copy (local.get $p) (local.get $src) (local.get $n))
    (call $pack (local.get $p) (local.get $n)))

  (func (export "openwop_abi_version") (result i32) (i32.const 1))
  (func (export "openwop_pack_name") (result i64) (call $copy (i32.const 16) (i32.const 26)))
  (func (export "openwop_node_count") (result i32) (i32.const 2))
  (func (export "openwop_node_id_at") (param $i i32) (result i64)
    (if (result i64) (i32.eqz (local.get $i))
      (then (call $copy (i32.const 48) (i32.const 13)))
      (else (call $copy (i32.const 64) (i32.const 13)))))

  (func (export "openwop_node_invoke") (param $node i32) (param $req i32) (param $len i32) (result i64)
    (local $p i32)
    (if (i32.eqz (local.get $node))
      (then
        (loop $more
          (br_if $more (i32.ne (memory.grow (i32.const 1024)) (i32.const -1))))
        unreachable))
    ;; {"outcome":"completed","output": REQUEST }
    (local.set $p (call $alloc (i32.add (local.get $len) (i32.const 33))))
    (memory.copy (local.get $p) (i32.const 96) (i32.const 32))
    (memory.copy (i32.add (local.get $p) (i32.const 32)) (local.get $req) (local.get $len))
    (i32.store8 (i32.add (i32.add (local.get $p) (local.get $len)) (i32.const 32)) (i32.const 125))
    (call $pack (local.get $p) (i32.add (local.get $len) (i32.const 33)))))
