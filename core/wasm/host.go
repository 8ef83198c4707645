package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/wophost/wophost/sdk/wop"
)

// Status is an import's status code, as the ABI numbers them.
type Status int32

// Status codes of openwop_channel_write and openwop_variable_set.
const (
	StatusOK                               Status = 0
	StatusChannelAccessDenied              Status = 1
	StatusChannelSchemaBreakingChange      Status = 2
	StatusChannelCrossEngineWriteForbidden Status = 3
	StatusValidation                       Status = 10
	StatusNotFound                         Status = 11
	StatusCapabilityBreach                 Status = 20
	StatusHostError                        Status = 99
)

// Imports answers the module's imports during one invocation; the host
// implements it per run (recording and replaying the answers). Methods are
// called on the invocation's goroutine, one at a time. An error returned by
// any method except Call aborts the invocation: Invoke returns that same
// error.
type Imports interface {
	ChannelRead(ctx context.Context, name string) (value []byte, found bool, err error)
	ChannelWrite(ctx context.Context, name string, value []byte) (Status, error)
	VariableGet(ctx context.Context, key string) (value []byte, found bool, err error)
	VariableSet(ctx context.Context, key string, value []byte) (Status, error)
	Interrupt(ctx context.Context, payload []byte) (resume []byte, err error)
	Log(level int, message string)
	NowMs(ctx context.Context) (int64, error)
	Random(ctx context.Context, n int) ([]byte, error)
	// Call is wophost_call: its error is the call's refusal, answered to the
	// module as {"error": …}, never an abort.
	Call(ctx context.Context, family, method string, payload []byte) ([]byte, error)
	Advertised(ctx context.Context) ([]byte, error)
}

// callState is what host functions of one instance's current call need;
// Invoke and instantiation put it in the context wazero hands them.
type callState struct {
	imports Imports // nil outside an invocation
	budget  *budget
	logger  hclog.Logger
	abort   error // set by a host function that stopped the call
	// alloc is the instance's openwop_alloc once made: a run calls it
	// for its request and again for each answer the host gives, and each
	// handle wazero makes carries a call stack of its own (10 KB).
	alloc api.Function
}

// export returns mod's export name, the same handle of openwop_alloc for
// every call of the run.
func (st *callState) export(mod api.Module, name string) api.Function {
	if name != expAlloc {
		return mod.ExportedFunction(name)
	}
	if st.alloc == nil {
		st.alloc = mod.ExportedFunction(expAlloc)
	}
	return st.alloc
}

type stateKey struct{}

func withState(ctx context.Context, st *callState) context.Context {
	return context.WithValue(ctx, stateKey{}, st)
}

// errAborted is the panic of a host function stopping the call; the reason
// is in callState.abort (or in the budget or the context).
var errAborted = errors.New("aborted by the host")

// hostCall is one call of a host function.
type hostCall struct {
	ctx  context.Context
	mod  api.Module
	st   *callState
	name string
}

// fail stops the call with err.
func (h *hostCall) fail(err error) {
	if h.st.abort == nil {
		h.st.abort = err
	}
	panic(errAborted)
}

// trap stops the call as the module's fault.
func (h *hostCall) trap(format string, args ...any) {
	h.fail(&Trap{Message: h.name + ": " + fmt.Sprintf(format, args...)})
}

// imports answers the invocation's Imports, or stops a call made outside
// one (from _initialize).
func (h *hostCall) imports() Imports {
	if h.st.imports == nil {
		h.fail(fmt.Errorf("wasm: %s: called outside an invocation (from _initialize or at load)", h.name))
	}
	return h.st.imports
}

// read copies len bytes at ptr out of the module's memory.
func (h *hostCall) read(what string, ptr, n uint32, limit int) []byte {
	if int64(n) > int64(limit) {
		h.trap("%s of %d bytes, above the bound of %d", what, n, limit)
	}
	view, ok := h.mod.Memory().Read(ptr, n)
	if !ok {
		h.trap("%s (ptr %d, len %d) runs past the end of memory (%d bytes)", what, ptr, n, h.mod.Memory().Size())
	}
	return append([]byte(nil), view...)
}

// readString reads a UTF-8 name or message.
func (h *hostCall) readString(what string, ptr, n uint32, limit int) string {
	b := h.read(what, ptr, n, limit)
	if !utf8.Valid(b) {
		h.trap("%s is not valid UTF-8", what)
	}
	return string(b)
}

// readJSON reads a JSON value or payload.
func (h *hostCall) readJSON(what string, ptr, n uint32) []byte {
	b := h.read(what, ptr, n, MaxResponseBytes)
	if !json.Valid(b) {
		h.trap("%s is not valid JSON", what)
	}
	return b
}

// give copies data into memory the module allocates with openwop_alloc; the
// module owns it afterwards.
func (h *hostCall) give(data []byte) (ptr, n uint32) {
	if len(data) == 0 {
		return 0, 0
	}
	if len(data) > MaxResponseBytes {
		h.fail(fmt.Errorf("wasm: %s: the host's answer of %d bytes is above the bound of %d", h.name, len(data), MaxResponseBytes))
	}
	alloc := h.st.export(h.mod, expAlloc)
	// The module runs again: its time counts.
	h.st.budget.resume()
	res, err := alloc.Call(h.ctx, uint64(len(data)))
	h.st.budget.pause()
	if err != nil {
		// The budget or the caller's context may have stopped it; else it
		// trapped. Invoke tells which.
		if h.ctx.Err() == nil {
			h.fail(&Trap{Message: expAlloc + ": " + trapMessage(err)})
		}
		panic(errAborted)
	}
	ptr = api.DecodeU32(res[0])
	if ptr == 0 || !h.mod.Memory().Write(ptr, data) {
		h.trap("%s(%d) answered %d, not room for the answer in memory of %d bytes", expAlloc, len(data), ptr, h.mod.Memory().Size())
	}
	return ptr, uint32(len(data))
}

// hostFunc is the body of one host function.
type hostFunc func(h *hostCall, stack []uint64, packed bool)

// hostFuncs are the bodies of the host functions, by import module and name.
func hostFuncs() map[string]map[string]hostFunc {
	return map[string]map[string]hostFunc{
		modOpenWOP: {
			"openwop_channel_read":  lookupFunc("channel name", Imports.ChannelRead),
			"openwop_channel_write": storeFunc("channel name", "channel value", Imports.ChannelWrite),
			"openwop_variable_get":  lookupFunc("variable key", Imports.VariableGet),
			"openwop_variable_set":  storeFunc("variable key", "variable value", Imports.VariableSet),
			"openwop_interrupt": func(h *hostCall, stack []uint64, packed bool) {
				payload := h.readJSON("interrupt payload", api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
				resume, err := h.imports().Interrupt(h.ctx, payload)
				if err != nil {
					h.fail(err)
				}
				ptr, n := h.give(resume)
				putPair(stack, packed, ptr, n)
			},
			"openwop_log": func(h *hostCall, stack []uint64, _ bool) {
				level := int32(api.DecodeU32(stack[0]))
				msg := h.readString("log message", api.DecodeU32(stack[1]), api.DecodeU32(stack[2]), MaxLogBytes)
				if level < 0 || level > 4 {
					h.trap("log level %d is not one of 0 (trace) .. 4 (error)", level)
				}
				// The host logs it, with the run it belongs to.
				h.imports().Log(int(level), msg)
			},
			"openwop_now_ms": func(h *hostCall, stack []uint64, _ bool) {
				ms, err := h.imports().NowMs(h.ctx)
				if err != nil {
					h.fail(err)
				}
				stack[0] = uint64(ms)
			},
			"openwop_random": func(h *hostCall, stack []uint64, _ bool) {
				ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
				if n > MaxRandomBytes {
					h.trap("random length %d is above the bound of %d", n, MaxRandomBytes)
				}
				if _, ok := h.mod.Memory().Read(ptr, n); !ok {
					h.trap("random buffer (ptr %d, len %d) runs past the end of memory (%d bytes)", ptr, n, h.mod.Memory().Size())
				}
				b, err := h.imports().Random(h.ctx, int(n))
				if err != nil {
					h.fail(err)
				}
				if len(b) != int(n) {
					h.fail(fmt.Errorf("wasm: openwop_random: the host answered %d bytes for %d", len(b), n))
				}
				h.mod.Memory().Write(ptr, b)
			},
		},
		modWophost: {
			"wophost_call": func(h *hostCall, stack []uint64, packed bool) {
				family := h.readString("family", api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), MaxNameBytes)
				method := h.readString("method", api.DecodeU32(stack[2]), api.DecodeU32(stack[3]), MaxNameBytes)
				payload := h.readJSON("payload", api.DecodeU32(stack[4]), api.DecodeU32(stack[5]))
				ptr, n := h.give(callAnswer(h.imports().Call(h.ctx, family, method, payload)))
				putPair(stack, packed, ptr, n)
			},
			"wophost_advertised": func(h *hostCall, stack []uint64, packed bool) {
				adv, err := h.imports().Advertised(h.ctx)
				if err != nil {
					h.fail(err)
				}
				ptr, n := h.give(adv)
				putPair(stack, packed, ptr, n)
			},
		},
	}
}

// lookupFunc is a read of a channel or a variable by name.
func lookupFunc(what string, get func(Imports, context.Context, string) ([]byte, bool, error)) hostFunc {
	return func(h *hostCall, stack []uint64, packed bool) {
		name := h.readString(what, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), MaxNameBytes)
		value, found, err := get(h.imports(), h.ctx, name)
		h.answerLookup(stack, packed, value, found, err)
	}
}

// storeFunc is a write of a channel or a variable, answered with a status:
// a value that is not JSON is validation_error (10), which the module
// can handle, and nothing is written.
func storeFunc(what, valueWhat string, set func(Imports, context.Context, string, []byte) (Status, error)) hostFunc {
	return func(h *hostCall, stack []uint64, _ bool) {
		name := h.readString(what, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), MaxNameBytes)
		value := h.read(valueWhat, api.DecodeU32(stack[2]), api.DecodeU32(stack[3]), MaxResponseBytes)
		if !json.Valid(value) {
			stack[0] = api.EncodeI32(int32(StatusValidation))
			return
		}
		status, err := set(h.imports(), h.ctx, name, value)
		if err != nil {
			h.fail(err)
		}
		stack[0] = api.EncodeI32(int32(status))
	}
}

// answerLookup answers a read: the value, or (0, 0) for a miss.
func (h *hostCall) answerLookup(stack []uint64, packed bool, value []byte, found bool, err error) {
	if err != nil {
		h.fail(err)
	}
	var ptr, n uint32
	if found {
		ptr, n = h.give(value)
	}
	putPair(stack, packed, ptr, n)
}

// callAnswer is wophost_call's answer: {"result": …} or {"error": …}.
func callAnswer(result []byte, err error) []byte {
	var answer any
	switch {
	case err != nil:
		answer = struct {
			Error *wop.Error `json:"error"`
		}{wop.AsError(err)}
	case !json.Valid(result):
		answer = struct {
			Error *wop.Error `json:"error"`
		}{&wop.Error{Code: wop.CodeInternal, Message: "the host service answered a result that is not valid JSON"}}
	default:
		answer = struct {
			Result json.RawMessage `json:"result"`
		}{result}
	}
	b, merr := json.Marshal(answer)
	if merr != nil {
		// A wop.Error always marshals; this is a last resort.
		return []byte(`{"error":{"code":"internal","message":"the host could not encode the answer"}}`)
	}
	return b
}

// instantiateHostModules provides "openwop" and "wophost" in rt, each
// function with the signature cm declared for it (checkImports has checked
// it), so that a pair result takes the module's form.
func instantiateHostModules(ctx context.Context, rt wazero.Runtime, cm wazero.CompiledModule) error {
	bodies := hostFuncs()
	builders := map[string]wazero.HostModuleBuilder{}
	for _, def := range cm.ImportedFunctions() {
		modName, name, _ := def.Import()
		body, ok := bodies[modName][name]
		if !ok {
			continue
		}
		b, ok := builders[modName]
		if !ok {
			b = rt.NewHostModuleBuilder(modName)
			builders[modName] = b
		}
		// Only a pair may be packed; openwop_now_ms's i64 is a number.
		isPair := len(hostImports()[modName][name].results) > 1
		fn := hostFunction(name, body, isPair && encodingOf(def.ResultTypes()) == EncodingPackedI64)
		b.NewFunctionBuilder().WithGoModuleFunction(fn, def.ParamTypes(), def.ResultTypes()).Export(name)
	}
	for modName, b := range builders {
		if _, err := b.Instantiate(ctx); err != nil {
			return fmt.Errorf("wasm: host module %s: %w", modName, err)
		}
	}
	return nil
}

// hostFunction wraps a body: it finds the call's state, pauses the
// execution budget while the host runs, and stops the call on failure.
func hostFunction(name string, body hostFunc, packed bool) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		st, ok := ctx.Value(stateKey{}).(*callState)
		if !ok {
			panic(fmt.Errorf("wasm: %s called without an invocation state", name))
		}
		st.budget.pause()
		defer st.budget.resume()
		defer func() {
			// A panic of the host's own code is the host's fault, not a trap.
			if r := recover(); r != nil {
				if r != errAborted && st.abort == nil {
					st.abort = fmt.Errorf("wasm: %s: the host panicked: %v", name, r)
				}
				panic(errAborted)
			}
		}()
		body(&hostCall{ctx: ctx, mod: mod, st: st, name: name}, stack, packed)
	}
}

// trapMessage is wazero's error without the wasm stack trace it appends.
func trapMessage(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "\nwasm stack trace:"); i >= 0 {
		msg = msg[:i]
	}
	if i := strings.Index(msg, "\n"); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}
