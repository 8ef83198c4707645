;; The pack community.wophost.wasmcall, written by hand for the host's
;; benchmarks: the least a WebAssembly node that makes one host-service
;; call can do. Node wasmcall.call calls test.echo's echo once through
;; wophost_call, with the node's input as the payload, and answers
;;   {"outcome":"completed","output":ANSWER}
;; where ANSWER is wophost_call's answer as it came: {"result":…} or
;; {"error":…}. It parses no JSON: the host writes the request envelope's
;; "inputs" member last, so the input is every byte after the first
;; "inputs": up to the envelope's closing brace. Pairs are multi-value
;; results, imports and exports alike.
(module
  ;; wophost_call(family, method, payload) -> answer pair.
  (import "wophost" "wophost_call"
    (func $call (param i32 i32 i32 i32 i32 i32) (result i32 i32)))

  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (data (i32.const 16) "community.wophost.wasmcall")                 ;; 26 bytes
  (data (i32.const 48) "wasmcall.call")                              ;; 13 bytes
  (data (i32.const 64) "test.echo")                                  ;; 9 bytes
  (data (i32.const 80) "echo")                                       ;; 4 bytes
  (data (i32.const 96) "\"inputs\":")                                ;; 9 bytes
  (data (i32.const 112) "{\"outcome\":\"completed\",\"output\":")  ;; 32 bytes

  ;; A bump allocator, growing the memory as needed; 0 says no room. The
  ;; instance ends with the run, so nothing is freed.
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

  (func $copy (param $src i32) (param $n i32) (result i32 i32)
    (local $p i32)
    (local.set $p (call $alloc (local.get $n)))
    (memory.copy (local.get $p) (local.get $src) (local.get $n))
    (local.get $p) (local.get $n))

  (func (export "openwop_abi_version") (result i32) (i32.const 1))
  (func (export "openwop_pack_name") (result i32 i32) (call $copy (i32.const 16) (i32.const 26)))
  (func (export "openwop_node_count") (result i32) (i32.const 1))
  (func (export "openwop_node_id_at") (param i32) (result i32 i32) (call $copy (i32.const 48) (i32.const 13)))

  ;; $inputs answers where the value of the first "inputs": member of the
  ;; request at req (len bytes) starts; it traps when there is none, which
  ;; the host reports as the run's failure.
  (func $inputs (param $req i32) (param $len i32) (result i32)
    (local $i i32) (local $last i32)
    (local.set $i (local.get $req))
    ;; The last place the 9-byte key could start.
    (local.set $last (i32.sub (i32.add (local.get $req) (local.get $len)) (i32.const 9)))
    (block $found
      (loop $scan
        (br_if $found
          (i32.and
            (i64.eq (i64.load (local.get $i)) (i64.load (i32.const 96)))
            (i32.eq (i32.load8_u (i32.add (local.get $i) (i32.const 8))) (i32.const 58))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $scan (i32.le_s (local.get $i) (local.get $last)))
        unreachable))
    (i32.add (local.get $i) (i32.const 9)))

  (func (export "openwop_node_invoke") (param $node i32) (param $req i32) (param $len i32) (result i32 i32)
    (local $in i32) (local $ans i32) (local $n i32) (local $p i32)
    (local.set $in (call $inputs (local.get $req) (local.get $len)))
    ;; The payload: from the value's start to before the envelope's "}".
    (call $call
      (i32.const 64) (i32.const 9)
      (i32.const 80) (i32.const 4)
      (local.get $in) (i32.sub (i32.sub (i32.add (local.get $req) (local.get $len)) (i32.const 1)) (local.get $in)))
    (local.set $n)
    (local.set $ans)
    ;; {"outcome":"completed","output": ANSWER }
    (local.set $p (call $alloc (i32.add (local.get $n) (i32.const 33))))
    (memory.copy (local.get $p) (i32.const 112) (i32.const 32))
    (memory.copy (i32.add (local.get $p) (i32.const 32)) (local.get $ans) (local.get $n))
    (i32.store8 (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 32)) (i32.const 125))
    (local.get $p) (i32.add (local.get $n) (i32.const 33))))
