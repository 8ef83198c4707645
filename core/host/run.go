package host

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/sdk/hostwire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/tracing"
	"github.com/wophost/wophost/sdk/wop"
)

// RunOptions are the optional settings of one node run.
type RunOptions struct {
	// Timeout bounds the run; zero means the host's run_timeout (and
	// call_timeout for each of its host-service calls), and more than
	// run_timeout is held to it. For Call, zero means call_timeout.
	Timeout time.Duration
	// IdempotencyKey, when set, makes the run idempotent (runKeyed): a
	// repeat of the same request under the key gets the recorded outcome
	// instead of a second run. It must match the key grammar. It also
	// travels in the call context of every call the run makes.
	IdempotencyKey string
	// IdempotencyScope is whom the key, and the run, belong to: keys of
	// different scopes never meet, and the run's record names its scope
	// as its owner (RunRecord.Owner), whom the API lets replay it. The
	// API derives it from the caller's credential (idempotency.Scope,
	// never the credential); the operator's CLI and an API without tokens
	// use the empty scope.
	IdempotencyScope string
	Traceparent      string
	// Record writes a run record once the node has run (RunRecord),
	// whatever its outcome: state_dir/runs/<runId>.json, or with the
	// postgres storage backend a row of the host's schema.
	Record bool
	// Replay, when set, replays that recorded run: every prompt the node
	// asks for resolves to the version and digest the record holds, and a
	// prompt the record does not hold is refused (prompt_unpinned). The
	// caller passes the record's typeId and input.
	Replay *RunRecord
	// Live names the calls a replay runs for real although they have
	// effects, each a family ("aiEnvelope") or family.method
	// ("mcp.callTool"): the replay becomes a branch.
	Live []string
}

// RunResult is the outcome of a node run. Run returns one with a RunID
// whenever the node ran, beside the error when it failed; a run refused
// before any pack code ran has none (or, replayed from an idempotency
// key, one without a RunID). Callers answer the two differently: a run
// outcome, or a refusal.
type RunResult struct {
	RunID  string
	Output json.RawMessage
	// Prompts are the prompts the run resolved, each reference once.
	Prompts []dispatch.ResolvedPrompt
	// RecordPath is where the run record is when RunOptions.Record was set
	// and the record was written: its file's path, or with the postgres
	// storage backend the run id it is found by (Host.RunRecord).
	RecordPath string
	// RecordError says why the run record was not written, when it was
	// asked for and could not be: the run's outcome stands, since the
	// node has run and its effects happened.
	RecordError string
	// Replayed is set when the outcome is the recorded outcome of the
	// request's idempotency key, answered without running the node.
	Replayed bool
	// Replay says what a replay of a recorded run (RunOptions.Replay) did
	// with each call; nil for other runs.
	Replay *dispatch.ReplaySummary
}

// Run executes the node typeID with input. Every check that can refuse the
// node runs before any pack code: the node exists, its pack loaded, every
// family it requires is advertised now, it needs no secrets, credentials
// or model capabilities (the host provides none), and input matches its
// schema.
func (h *Host) Run(ctx context.Context, typeID string, input json.RawMessage, opts RunOptions) (*RunResult, error) {
	// The run's span parents everything the node does; its traceparent
	// travels in the run's call context to the pack and every plugin.
	ctx, span, traceparent := tracing.Start(ctx, h.tracer, opts.Traceparent, "run "+typeID, trace.SpanKindServer)
	opts.Traceparent = traceparent
	var res *RunResult
	var err error
	if opts.IdempotencyKey != "" {
		res, err = h.runKeyed(ctx, typeID, input, opts)
	} else {
		res, err = h.run(ctx, typeID, input, opts)
	}
	tracing.End(span, err, wop.CodeOf(err))
	return res, err
}

func (h *Host) run(ctx context.Context, typeID string, input json.RawMessage, opts RunOptions) (*RunResult, error) {
	h.mu.RLock()
	p, ok := h.byTypeID[typeID]
	h.mu.RUnlock()
	if !ok {
		return nil, wop.Errorf(wop.CodeNotFound, "no loaded pack serves node %q", typeID)
	}
	proc, module, err := p.runnable(typeID)
	if err != nil {
		return nil, err
	}
	for _, r := range p.manifest.NodeRequirements(typeID) {
		if !h.reg.Has(r.Family, r.Facet) {
			name := "host." + r.Family
			if r.Facet != "" {
				name += "." + r.Facet
			}
			if we := h.reg.NotServed(r.Family, name); we.Code != wop.CodeCapabilityNotProvided {
				// Withdrawn for a while: the node is not refused for good.
				return nil, we
			}
			return nil, wop.NotProvided(name).WithDetails(map[string]string{"typeId": typeID})
		}
	}
	node, _ := p.manifest.Node(typeID)
	if err := node.DispatchRefusal(); err != nil {
		return nil, err
	}
	if err := node.ValidateInput(input); err != nil {
		return nil, err
	}
	// A run that leaves a record is refused while the state directory
	// cannot take it: refused now, before the node acts, rather than
	// after, with effects that no record accounts for.
	if opts.Record {
		if err := h.state.writable(); err != nil {
			return nil, err
		}
	}
	timeout, callTimeout := runBounds(opts.Timeout, h.cfg.Host.RunTimeout, h.cfg.Host.CallTimeout)
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	run := &dispatch.Run{
		ID: dispatch.NewID("run"), NodeID: dispatch.NewID("node"), TypeID: typeID, Pack: p.Name,
		CallTimeout: callTimeout,
		Allowed:     p.manifest.Declared(typeID),
		Traceparent: opts.Traceparent, IdempotencyKey: opts.IdempotencyKey,
		// The pack gets the token with the run's call context below and
		// must carry it back on every call; the run id alone, which the
		// record and the API answer name, binds nothing.
		Token: dispatch.NewRunToken(),
	}
	if d, ok := ctx.Deadline(); ok {
		run.Deadline = d
	}
	remove := h.runs.Add(run)
	defer remove()
	rec := &RunRecord{
		RunID: run.ID, NodeID: run.NodeID, TypeID: typeID, Pack: p.Name, PackVersion: p.Version, Input: input, StartedAt: time.Now().UTC(),
		Owner: opts.IdempotencyScope, IdempotencyKey: opts.IdempotencyKey,
	}
	if opts.Replay != nil && node.Role == packmanifest.RoleSideEffect && !slices.Contains(opts.Live, typeID) {
		if _, err := liveMatcher(opts.Live); err != nil {
			return nil, err
		}
		return h.replayFromRecord(rec, opts)
	}
	var replay []dispatch.ResolvedPrompt
	if opts.Replay != nil {
		rec.ReplayOf = opts.Replay.RunID
		replay = append([]dispatch.ResolvedPrompt{}, opts.Replay.Prompts...)
	}
	promptTrace, untrack := h.prompts.Track(run.ID, replay)
	defer untrack()
	calls, untrackCalls, err := h.trackCalls(run.ID, opts)
	if err != nil {
		return nil, err
	}
	defer untrackCalls()
	advertised := h.reg.AdvertisedFacets()
	var out []byte
	if module != nil {
		out, err = h.executeWasm(ctx, p, module, run, input, calls, advertised, opts.Replay)
	} else {
		// A run the host cannot offer its channels is refused before the
		// node runs.
		offers, channels, oerr := h.directOffers(run, opts, calls != nil, advertised)
		if oerr != nil {
			return nil, oerr
		}
		var account *wophostv1.DirectCallLog
		out, account, err = h.executeProcess(ctx, p, proc, run, input, offers, calls, advertised)
		// The run's grants end with its node: a pack that kept one cannot
		// use it again, and its calls join the run's log before the record.
		h.endDirect(run, rec.StartedAt, channels, offers, calls, account)
	}
	if err != nil {
		we := wop.AsError(err)
		if ctx.Err() != nil && (we.Code == wop.CodeUnavailable || we.Code == wop.CodeInternal) {
			if ctx.Err() == context.DeadlineExceeded {
				we = wop.Errorf(wop.CodeDeadlineExceeded, "node %s did not finish before its deadline", typeID)
			} else {
				we = wop.Errorf(wop.CodeCancelled, "node %s was cancelled", typeID)
			}
		}
		_, err = replayOutcome(calls, nil, we)
		res := &RunResult{RunID: run.ID}
		return res, h.record(rec, promptTrace, calls, opts, res, err)
	}
	out, err = replayOutcome(calls, out, nil)
	res := &RunResult{RunID: run.ID, Output: out}
	return res, h.record(rec, promptTrace, calls, opts, res, err)
}

// executeProcess runs the node on p's process, offering it the run's
// direct channels.
func (h *Host) executeProcess(ctx context.Context, p *Pack, proc *loader.Pack, run *dispatch.Run, input json.RawMessage,
	offers []*wophostv1.DirectChannelOffer, calls *dispatch.RunLog, advertised map[string][]byte) ([]byte, *wophostv1.DirectCallLog, error) {
	cc := run.CallContext("host")
	cc.Depth = 0
	req := &wophostv1.ExecuteRequest{
		TypeId: run.TypeID, Input: input, Call: hostwire.CallContextToProto(cc), Advertised: advertised,
		DirectChannels: offers, CallTimeoutMs: run.CallTimeout.Milliseconds(),
	}
	if len(offers) > 0 && calls != nil {
		// The pack's own account of its direct calls stands in for a
		// plugin that cannot give the host its own when the run ends.
		req.DirectLog = &wophostv1.DirectLogRequest{MaxCalls: int64(h.cfg.Host.Runs.LogMaxCalls), MaxBytes: int64(h.cfg.Host.Runs.LogMaxBytes)}
	}
	return h.execute(ctx, p, proc, req)
}

// replayFromRecord answers a replay of a side-effect node from its
// source run's record: the recorded output or error, none of the node's
// code run (OpenWOP: a side-effect node is never performed again on
// replay). A record without the outcome fails with replay_source_missing,
// having performed nothing. The replay's record carries the source's
// prompts and invocation log, so that it replays in turn.
func (h *Host) replayFromRecord(rec *RunRecord, opts RunOptions) (*RunResult, error) {
	src := opts.Replay
	rec.ReplayOf, rec.Prompts, rec.Invocations = src.RunID, src.Prompts, src.Invocations
	res := &RunResult{RunID: rec.RunID, Prompts: src.Prompts, Replay: &dispatch.ReplaySummary{Source: src.RunID, Node: dispatch.NodeFromRecord}}
	rec.Replay = res.Replay
	var err error
	switch {
	case src.Outcome == OutcomeSucceeded && len(src.Output) > 0:
		// The record's file indents the output; the node answered it
		// without insignificant whitespace, as it is answered again.
		var out bytes.Buffer
		if cerr := json.Compact(&out, src.Output); cerr != nil {
			return nil, wop.Errorf(dispatch.CodeReplaySourceMissing, "the recorded output of run %s is not JSON: %v", src.RunID, cerr)
		}
		res.Output = out.Bytes()
	case src.Outcome == OutcomeFailed && src.Error != nil:
		err = src.Error
	default:
		err = wop.Errorf(dispatch.CodeReplaySourceMissing,
			"node %s has the role side-effect and the record of run %s holds no outcome to answer it with (its output held a secret of the configuration); nothing was run", rec.TypeID, src.RunID).
			WithDetails(map[string]string{"sourceRunId": src.RunID, "reason": "outcome_missing"})
	}
	return res, h.record(rec, nil, nil, opts, res, err)
}

// runBounds is the timeout of a run whose caller asked for asked (zero:
// none), and the bound of each of its host-service calls (zero: none but
// the run's). A run without a deadline of its own gets runTimeout, so no
// node can hold its pack and plugins forever, and each of its calls
// callTimeout, so no hung plugin holds one call for the whole run. A
// caller's deadline past runTimeout is held to it.
func runBounds(asked, runTimeout, callTimeout time.Duration) (timeout, perCall time.Duration) {
	if asked <= 0 {
		return runTimeout, callTimeout
	}
	if runTimeout > 0 && asked > runTimeout {
		return runTimeout, 0
	}
	return asked, 0
}

// ServesNode reports whether a loaded pack serves the node typeID.
func (h *Host) ServesNode(typeID string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	_, ok := h.byTypeID[typeID]
	return ok
}

// Call invokes one host service as a node would, through the same routing
// and checks, on behalf of the operator. The operator may call any
// advertised family.
func (h *Host) Call(ctx context.Context, family, method string, payload json.RawMessage, opts RunOptions) (json.RawMessage, error) {
	// A call without a deadline of its own gets call_timeout, so that a
	// hung plugin does not hold the operator forever.
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = h.cfg.Host.CallTimeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	run := &dispatch.Run{
		ID: dispatch.NewID("run"), NodeID: dispatch.NewID("node"), TypeID: "operator.call",
		Traceparent: opts.Traceparent, IdempotencyKey: opts.IdempotencyKey,
		// The plugin called gets the token and carries it on its callbacks.
		Token: dispatch.NewRunToken(),
	}
	if d, ok := ctx.Deadline(); ok {
		run.Deadline = d
	}
	remove := h.runs.Add(run)
	defer remove()
	return h.router.Call(ctx, dispatch.Caller{Name: dispatch.Operator}, family, method, payload, run.CallContext(dispatch.Operator))
}
