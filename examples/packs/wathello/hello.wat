;; community.wophost.wathello: a node pack written in WebAssembly text, for
;; authors in any language that compiles to WebAssembly. It follows
;; OpenWOP's WASM ABI v1 and nothing more: it imports one function of the
;; "openwop" module and none of wophost's extension, so any OpenWOP host
;; that runs WebAssembly packs runs it.
;;
;; Its one node, wathello.greet, logs a line and answers
;;   {"greeting":"Hello from WebAssembly text!","request":REQUEST}
;; where REQUEST is the request envelope the host handed it, as it came.
;;
;; Every (ptr, len) pair is returned packed in one i64, ptr in the low 32
;; bits and len in the high 32, the form Rust's wasm32-unknown-unknown
;; target gives by default; a module may return two i32 results instead.
(module
  ;; openwop_log(level, msg_ptr, msg_len): level 0 trace .. 4 error.
  (import "openwop" "openwop_log" (func $log (param i32 i32 i32)))

  ;; The host reads the request, the response and every name through this.
  (memory (export "memory") 1)

  ;; The next free byte: a bump allocator, enough for one invocation, as
  ;; the host gives every run an instance of its own.
  (global $heap (mut i32) (i32.const 1024))

  (data (i32.const 16) "community.wophost.wathello")                ;; 26 bytes
  (data (i32.const 48) "wathello.greet")                            ;; 14 bytes
  (data (i32.const 64) "greeting from WebAssembly text")            ;; 30 bytes
  (data (i32.const 96) "{\"outcome\":\"completed\",\"output\":{\"greeting\":\"Hello from WebAssembly text!\",\"request\":") ;; 85 bytes

  ;; openwop_alloc(size) -> ptr: the host asks for room here for the
  ;; request and for the answers of imports.
  (func $alloc (export "openwop_alloc") (param $n i32) (result i32)
    (local $p i32) (local $end i32) (local $pages i32)
    (local.set $p (global.get $heap))
    (local.set $end (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
    ;; Grow the memory when the end passes it; 0 says no room.
    (local.set $pages (i32.sub (i32.shr_u (i32.add (local.get $end) (i32.const 65535)) (i32.const 16)) (memory.size)))
    (if (i32.gt_s (local.get $pages) (i32.const 0))
      (then
        (if (i32.eq (memory.grow (local.get $pages)) (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))

  ;; openwop_free(ptr, size): the host hands back what it read. A bump
  ;; allocator frees nothing; the instance ends with the run.
  (func (export "openwop_free") (param i32 i32))

  ;; $pair packs ptr and len into one i64.
  (func $pair (param $p i32) (param $n i32) (result i64)
    (i64.or (i64.extend_i32_u (local.get $p)) (i64.shl (i64.extend_i32_u (local.get $n)) (i64.const 32))))

  ;; $copy copies n bytes at src into a fresh allocation and returns it as
  ;; a pair: what the module returns, the host frees.
  (func $copy (param $src i32) (param $n i32) (result i64)
    (local $p i32)
    (local.set $p (call $alloc (local.get $n)))
    (memory.copy (local.get $p) (local.get $src) (local.get $n))
    (call $pair (local.get $p) (local.get $n)))

  (func (export "openwop_abi_version") (result i32) (i32.const 1))
  (func (export "openwop_pack_name") (result i64) (call $copy (i32.const 16) (i32.const 26)))
  (func (export "openwop_node_count") (result i32) (i32.const 1))
  (func (export "openwop_node_id_at") (param i32) (result i64) (call $copy (i32.const 48) (i32.const 14)))

  ;; openwop_node_invoke(node_index, req_ptr, req_len) -> response pair.
  (func (export "openwop_node_invoke") (param $node i32) (param $req i32) (param $len i32) (result i64)
    (local $p i32) (local $n i32)
    (call $log (i32.const 2) (i32.const 64) (i32.const 30))
    ;; The response: the prefix, the request as it came, and "}}".
    (local.set $n (i32.add (local.get $len) (i32.const 87)))
    (local.set $p (call $alloc (local.get $n)))
    (memory.copy (local.get $p) (i32.const 96) (i32.const 85))
    (memory.copy (i32.add (local.get $p) (i32.const 85)) (local.get $req) (local.get $len))
    (i32.store16 (i32.add (local.get $p) (i32.add (local.get $len) (i32.const 85))) (i32.const 0x7d7d))
    (call $pair (local.get $p) (local.get $n))))
