package host

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/wasm"
	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/hostwire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// FamilyOpenWOPImports is the family under which a run's log keeps the
// answers the host gave a WebAssembly node's imports (openwop.now_ms,
// openwop.random, …), so that a replay answers them again.
const FamilyOpenWOPImports = "openwop"

// wasmTenant is nodeContext.tenantId: the host serves one tenant.
const wasmTenant = "default"

// wasmAttempt is nodeContext.attempt: the host runs a node once per run.
const wasmAttempt = 1

// executeWasm runs one node of p's module on a fresh instance. Every
// answer the host gives the module, host-service calls included, goes
// through the run's log: a replay of the run answers from it, and seeds
// the instance's randomness from the source run, so that it is exact.
func (h *Host) executeWasm(ctx context.Context, p *Pack, mod *wasm.Module, run *dispatch.Run, input json.RawMessage,
	calls *dispatch.RunLog, advertised map[string][]byte, replay *RunRecord) (json.RawMessage, error) {
	randomSeed, wasiSeed := wasmSeeds(run, replay)
	imp := &wasmImports{
		p: p, run: run, calls: calls,
		caller:     admission.NodeCaller(p.Name, run.TypeID),
		advertised: advertised,
		random:     rand.NewChaCha8(randomSeed),
		variables:  map[string][]byte{},
		channels:   map[string][]byte{},
		logger:     h.logger.Named(p.Name).With("run_id", run.ID, "node_id", run.NodeID, "type_id", run.TypeID),
	}
	resp, err := mod.Invoke(ctx, wasm.Invocation{
		TypeID: run.TypeID,
		Request: wasm.Request{
			RunID: run.ID, NodeID: run.NodeID, TenantID: wasmTenant, Attempt: wasmAttempt, Inputs: input,
		},
		Imports: imp,
		Seed:    wasiSeed,
	})
	if err != nil {
		return nil, h.wasmFailure(ctx, p, run.TypeID, err)
	}
	switch resp.Outcome {
	case wasm.OutcomeCompleted:
		return resp.Output, nil
	case wasm.OutcomeSuspended:
		return nil, suspendRefused(run.TypeID, resp.Interrupt)
	default:
		return nil, &wop.Error{Code: resp.Error.Code, Message: resp.Error.Message, Details: resp.Error.Details}
	}
}

// wasmSeeds are the seeds of a run's openwop_random stream and of its
// instance's WASI random source: the run's own, or for a replay of a
// WebAssembly run the source run's, so that what the module draws outside
// the log (its runtime's WASI reads) is drawn again.
func wasmSeeds(run *dispatch.Run, replay *RunRecord) (random, wasi [32]byte) {
	runID, nodeID := run.ID, run.NodeID
	if replay != nil && replay.NodeID != "" {
		runID, nodeID = replay.RunID, replay.NodeID
	}
	return runSeed("openwop_random", runID, nodeID), runSeed("wasi", runID, nodeID)
}

// runSeed derives a run's seed for one source of randomness from the run
// and node ids and the attempt (OpenWOP RFC 0008 §G).
func runSeed(source, runID, nodeID string) [32]byte {
	h := sha256.New()
	for _, s := range []string{"wophost wasm", source, runID, nodeID} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var attempt [8]byte
	binary.BigEndian.PutUint64(attempt[:], wasmAttempt)
	h.Write(attempt[:])
	var seed [32]byte
	copy(seed[:], h.Sum(nil))
	return seed
}

// suspendRefused fails a node that suspended.
func suspendRefused(typeID string, interrupt json.RawMessage) error {
	e := wop.Errorf(CodeSuspendNotSupported, "node %s suspended; this host runs single nodes and cannot resume one", typeID)
	if len(interrupt) > 0 {
		e = e.WithDetails(map[string]json.RawMessage{"interrupt": interrupt})
	}
	return e
}

// wasmFailure is the run's error for what Invoke returned: a cap
// breached, a trap, a bad envelope, the run's own deadline, or the error
// the host's answer to an import ended the run with.
func (h *Host) wasmFailure(ctx context.Context, p *Pack, typeID string, err error) error {
	var breach *wasm.CapBreach
	var trap *wasm.Trap
	var envelope *wasm.EnvelopeError
	switch {
	case errors.As(err, &breach):
		h.logger.Warn("a WebAssembly node was stopped at its pack's cap", "pack", p.Name, "type_id", typeID,
			"kind", breach.Kind, "limit", breach.Limit, "observed", breach.Observed)
		if h.onViolation != nil {
			// Counted with the sandbox's failures of the same rule: the
			// caps are a WebAssembly pack's sandbox.
			code := wop.CodeSandboxMemoryExceeded
			if breach.Kind == wasm.BreachExecutionTime {
				code = wop.CodeSandboxTimeout
			}
			h.onViolation(p.Name, code)
		}
		return wop.Errorf(CodeCapBreached, "node %s of pack %s: %v", typeID, p.Name, breach).
			WithDetails(map[string]any{"kind": breach.Kind, "limit": breach.Limit, "observed": breach.Observed})
	case errors.As(err, &trap):
		return wop.Errorf(CodeWasmInvocationFailed, "node %s of pack %s: %v", typeID, p.Name, trap)
	case errors.As(err, &envelope):
		return wop.Errorf(CodeWasmInvocationFailed, "node %s of pack %s: %v", typeID, p.Name, envelope)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return wop.Errorf(wop.CodeDeadlineExceeded, "node %s did not finish before its deadline", typeID)
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return wop.Errorf(wop.CodeCancelled, "node %s was cancelled", typeID)
	}
	var we *wop.Error
	if errors.As(err, &we) {
		return we
	}
	return wop.Errorf(wop.CodeInternal, "node %s of pack %s: %v", typeID, p.Name, err)
}

// wasmImports answers one run's imports. What the module could tell apart
// between two runs (the clock, random bytes, variables, channels,
// host-service calls) goes through the run's log.
type wasmImports struct {
	p          *Pack
	run        *dispatch.Run
	calls      *dispatch.RunLog
	caller     string
	advertised map[string][]byte
	random     *rand.ChaCha8
	// variables and channels live as long as the run: the host runs one
	// node, with no workflow around it to share them with.
	variables map[string][]byte
	channels  map[string][]byte
	logger    hclog.Logger
}

// answer gives the module what perform gives, logged under
// openwop.method with request, or on a replay the source run's answer.
func (w *wasmImports) answer(method string, request any, perform func() ([]byte, error)) ([]byte, error) {
	if w.calls == nil {
		return perform()
	}
	req, err := json.Marshal(request)
	if err != nil {
		return nil, wop.Errorf(wop.CodeInternal, "encode the request of openwop.%s: %v", method, err)
	}
	return w.calls.Answer(w.caller, FamilyOpenWOPImports, method, req, perform)
}

// lookup is a logged read of one of the run's stores.
type lookup struct {
	Found bool            `json:"found"`
	Value json.RawMessage `json:"value,omitempty"`
}

// read answers a read of store under name, logged as method.
func (w *wasmImports) read(method, member, name string, store map[string][]byte) ([]byte, bool, error) {
	out, err := w.answer(method, map[string]string{member: name}, func() ([]byte, error) {
		v, ok := store[name]
		return json.Marshal(lookup{Found: ok, Value: v})
	})
	if err != nil {
		return nil, false, err
	}
	var l lookup
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, false, wop.Errorf(wop.CodeInternal, "the logged answer of openwop.%s is not a lookup: %v", method, err)
	}
	return l.Value, l.Found, nil
}

// write answers a write of value to store under name, logged as method.
func (w *wasmImports) write(method, member, name string, value []byte, store map[string][]byte) (wasm.Status, error) {
	out, err := w.answer(method, map[string]any{member: name, "value": json.RawMessage(value)}, func() ([]byte, error) {
		store[name] = append([]byte(nil), value...)
		return []byte(`{"status":0}`), nil
	})
	if err != nil {
		return wasm.StatusHostError, err
	}
	var s struct {
		Status wasm.Status `json:"status"`
	}
	if err := json.Unmarshal(out, &s); err != nil {
		return wasm.StatusHostError, wop.Errorf(wop.CodeInternal, "the logged answer of openwop.%s is not a status: %v", method, err)
	}
	return s.Status, nil
}

// ChannelRead implements wasm.Imports.
func (w *wasmImports) ChannelRead(_ context.Context, name string) ([]byte, bool, error) {
	return w.read("channel_read", "name", name, w.channels)
}

// ChannelWrite implements wasm.Imports.
func (w *wasmImports) ChannelWrite(_ context.Context, name string, value []byte) (wasm.Status, error) {
	return w.write("channel_write", "name", name, value, w.channels)
}

// VariableGet implements wasm.Imports.
func (w *wasmImports) VariableGet(_ context.Context, key string) ([]byte, bool, error) {
	return w.read("variable_get", "key", key, w.variables)
}

// VariableSet implements wasm.Imports.
func (w *wasmImports) VariableSet(_ context.Context, key string, value []byte) (wasm.Status, error) {
	return w.write("variable_set", "key", key, value, w.variables)
}

// Interrupt implements wasm.Imports: the host cannot suspend a node, so
// the run ends with suspend_not_supported, logged like any answer.
func (w *wasmImports) Interrupt(_ context.Context, payload []byte) ([]byte, error) {
	return w.answer("interrupt", map[string]json.RawMessage{"payload": payload}, func() ([]byte, error) {
		return nil, suspendRefused(w.run.TypeID, payload)
	})
}

// Log implements wasm.Imports: the module's line, at its level (0 trace
// to 4 error, checked by the runtime), with the run's ids.
func (w *wasmImports) Log(level int, message string) {
	levels := [...]hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error}
	w.logger.Log(levels[min(max(level, 0), len(levels)-1)], message, "source", "openwop_log")
}

// NowMs implements wasm.Imports.
func (w *wasmImports) NowMs(context.Context) (int64, error) {
	out, err := w.answer("now_ms", struct{}{}, func() ([]byte, error) {
		return []byte(strconv.FormatInt(time.Now().UnixMilli(), 10)), nil
	})
	if err != nil {
		return 0, err
	}
	ms, err := strconv.ParseInt(string(out), 10, 64)
	if err != nil {
		return 0, wop.Errorf(wop.CodeInternal, "the logged answer of openwop.now_ms is not a number: %q", out)
	}
	return ms, nil
}

// Random implements wasm.Imports: bytes of the run's seeded stream.
func (w *wasmImports) Random(_ context.Context, n int) ([]byte, error) {
	out, err := w.answer("random", map[string]int{"bytes": n}, func() ([]byte, error) {
		b := make([]byte, n)
		_, _ = w.random.Read(b) // ChaCha8.Read never fails
		return json.Marshal(b)
	})
	if err != nil {
		return nil, err
	}
	var b []byte
	if err := json.Unmarshal(out, &b); err != nil || len(b) != n {
		return nil, wop.Errorf(wop.CodeInternal, "the logged answer of openwop.random is not %d bytes", n)
	}
	return b, nil
}

// Call implements wasm.Imports: the call goes through the pack's
// HostServices, with the checks and routing of a process pack's call.
func (w *wasmImports) Call(ctx context.Context, family, method string, payload []byte) ([]byte, error) {
	cc := w.run.CallContext("host")
	cc.Depth = 0
	resp, err := w.p.hostServices.Call(ctx, &wophostv1.CallRequest{
		Family: family, Method: method, Payload: payload, Call: hostwire.CallContextToProto(cc),
	})
	if err != nil {
		return nil, hostwire.FromStatus(err)
	}
	return resp.GetResult(), nil
}

// Advertised implements wasm.Imports: the run's advertisement, family by
// family, as a process pack gets it.
func (w *wasmImports) Advertised(context.Context) ([]byte, error) {
	doc := make(map[string]json.RawMessage, len(w.advertised))
	for fam, facets := range w.advertised {
		doc[fam] = facets
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode the advertisement: %w", err)
	}
	return b, nil
}
