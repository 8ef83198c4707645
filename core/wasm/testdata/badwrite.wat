;; A pack whose node "write" hands openwop_channel_write and
;; openwop_variable_set a value that is not JSON ("{"), and completes with
;; {"statuses":"XY"}, X and Y being the two statuses as the digits of a
;; byte each ('0' + status, so status 10 shows as ':').
(module
  (import "openwop" "openwop_channel_write" (func $chan_write (param i32 i32 i32 i32) (result i32)))
  (import "openwop" "openwop_variable_set" (func $var_set (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (data (i32.const 16) "wat-badwrite")
  (data (i32.const 32) "write")
  (data (i32.const 40) "c{")
  (data (i32.const 64) "{\"outcome\":\"completed\",\"output\":{\"statuses\":\"XY\"}}")

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
  (func (export "openwop_abi_version") (result i32) (i32.const 1))
  (func (export "openwop_pack_name") (result i32 i32) (call $copy (i32.const 16) (i32.const 12)))
  (func (export "openwop_node_count") (result i32) (i32.const 1))
  (func (export "openwop_node_id_at") (param i32) (result i32 i32) (call $copy (i32.const 32) (i32.const 5)))
  (func (export "openwop_node_invoke") (param i32 i32 i32) (result i32 i32)
    ;; "XY" sits at 64 + 45 and 64 + 46.
    (i32.store8 (i32.const 109) (i32.add (i32.const 48) (call $chan_write (i32.const 40) (i32.const 1) (i32.const 41) (i32.const 1))))
    (i32.store8 (i32.const 110) (i32.add (i32.const 48) (call $var_set (i32.const 40) (i32.const 1) (i32.const 41) (i32.const 1))))
    (call $copy (i32.const 64) (i32.const 50))))
