package wasm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Import module names.
const (
	modOpenWOP = "openwop"
	modWophost = "wophost"
	modWASI    = "wasi_snapshot_preview1"
)

// Encodings of a (ptr, len) pair.
const (
	EncodingMultiValue = "multi-value"
	EncodingPackedI64  = "packed-i64"
)

const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// signature is what the ABI allows for one function: its parameters and one
// or more allowed result lists.
type signature struct {
	params  []api.ValueType
	results [][]api.ValueType
}

// pair allows both forms of a (ptr, len) result.
func pairSig(params ...api.ValueType) signature {
	return signature{params: params, results: [][]api.ValueType{{i32, i32}, {i64}}}
}

func plainSig(params []api.ValueType, results ...api.ValueType) signature {
	return signature{params: params, results: [][]api.ValueType{results}}
}

func (s signature) allows(params, results []api.ValueType) bool {
	if !slices.Equal(s.params, params) {
		return false
	}
	for _, r := range s.results {
		if slices.Equal(r, results) {
			return true
		}
	}
	return false
}

func (s signature) String() string {
	rs := make([]string, len(s.results))
	for i, r := range s.results {
		rs[i] = typeList(r)
	}
	return typeList(s.params) + " -> " + strings.Join(rs, " or ")
}

func typeList(ts []api.ValueType) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = api.ValueTypeName(t)
	}
	return "(" + strings.Join(names, ", ") + ")"
}

// Export names of the ABI.
const (
	expABIVersion = "openwop_abi_version"
	expPackName   = "openwop_pack_name"
	expNodeCount  = "openwop_node_count"
	expNodeIDAt   = "openwop_node_id_at"
	expAlloc      = "openwop_alloc"
	expFree       = "openwop_free"
	expNodeInvoke = "openwop_node_invoke"
	expMemory     = "memory"
)

// requiredExports are the functions every module exports, in the order
// problems are listed.
func requiredExports() []struct {
	name string
	sig  signature
} {
	return []struct {
		name string
		sig  signature
	}{
		{expABIVersion, plainSig(nil, i32)},
		{expPackName, pairSig()},
		{expNodeCount, plainSig(nil, i32)},
		{expNodeIDAt, pairSig(i32)},
		{expAlloc, plainSig([]api.ValueType{i32}, i32)},
		{expFree, plainSig([]api.ValueType{i32, i32})},
		{expNodeInvoke, pairSig(i32, i32, i32)},
	}
}

// hostImports are the functions the host provides under "openwop" and
// "wophost", by module then name.
func hostImports() map[string]map[string]signature {
	two := []api.ValueType{i32, i32}
	four := []api.ValueType{i32, i32, i32, i32}
	return map[string]map[string]signature{
		modOpenWOP: {
			"openwop_channel_read":  pairSig(i32, i32),
			"openwop_channel_write": plainSig(four, i32),
			"openwop_variable_get":  pairSig(i32, i32),
			"openwop_variable_set":  plainSig(four, i32),
			"openwop_interrupt":     pairSig(i32, i32),
			"openwop_log":           plainSig([]api.ValueType{i32, i32, i32}),
			"openwop_now_ms":        plainSig(nil, i64),
			"openwop_random":        plainSig(two),
		},
		modWophost: {
			"wophost_call":       pairSig(i32, i32, i32, i32, i32, i32),
			"wophost_advertised": pairSig(),
		},
	}
}

// checkExports lists every required export that is missing or wrongly
// typed, and a missing memory export.
func checkExports(cm wazero.CompiledModule) error {
	funcs := cm.ExportedFunctions()
	var problems []string
	for _, want := range requiredExports() {
		def, ok := funcs[want.name]
		if !ok {
			problems = append(problems, want.name+": missing")
			continue
		}
		if !want.sig.allows(def.ParamTypes(), def.ResultTypes()) {
			problems = append(problems, fmt.Sprintf("%s: has %s -> %s, want %s",
				want.name, typeList(def.ParamTypes()), typeList(def.ResultTypes()), want.sig))
		}
	}
	if _, ok := cm.ExportedMemories()[expMemory]; !ok {
		problems = append(problems, expMemory+": missing (the module must export its memory)")
	}
	if len(problems) > 0 {
		return &ExportError{Problems: problems}
	}
	return nil
}

// checkImports lists every import the host does not provide. wasi lists
// the functions of the WASI module instantiated in the module's runtime.
func checkImports(cm wazero.CompiledModule, wasi map[string]api.FunctionDefinition) error {
	host := hostImports()
	var problems []string
	for _, def := range cm.ImportedFunctions() {
		mod, name, _ := def.Import()
		var (
			want  signature
			known bool
		)
		switch mod {
		case modWASI:
			if w, ok := wasi[name]; ok {
				want, known = plainSig(w.ParamTypes(), w.ResultTypes()...), true
			}
		default:
			want, known = host[mod][name]
		}
		if !known {
			problems = append(problems, mod+"."+name+": not provided")
			continue
		}
		if !want.allows(def.ParamTypes(), def.ResultTypes()) {
			problems = append(problems, fmt.Sprintf("%s.%s: has %s -> %s, want %s",
				mod, name, typeList(def.ParamTypes()), typeList(def.ResultTypes()), want))
		}
	}
	for _, mem := range cm.ImportedMemories() {
		mod, name, _ := mem.Import()
		problems = append(problems, mod+"."+name+": not provided (the host provides no memory; the module exports its own)")
	}
	if len(problems) > 0 {
		return &ImportError{Problems: problems}
	}
	return nil
}

// encodingOf names the pair form of a function's results.
func encodingOf(results []api.ValueType) string {
	if len(results) == 1 && results[0] == i64 {
		return EncodingPackedI64
	}
	return EncodingMultiValue
}

// splitPair reads a (ptr, len) pair from a function's results, in either
// form.
func splitPair(results []uint64) (ptr, n uint32) {
	if len(results) == 1 {
		return uint32(results[0]), uint32(results[0] >> 32)
	}
	return api.DecodeU32(results[0]), api.DecodeU32(results[1])
}

// putPair writes a (ptr, len) pair as the function's results, in the form
// the module declared: packed when it declared one i64 result.
func putPair(stack []uint64, packed bool, ptr, n uint32) {
	if packed {
		stack[0] = uint64(ptr) | uint64(n)<<32
		return
	}
	stack[0] = api.EncodeU32(ptr)
	stack[1] = api.EncodeU32(n)
}
