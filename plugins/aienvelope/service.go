package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/plugins/aienvelope/provider"
	"github.com/wophost/wophost/plugins/aienvelope/store"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// writeTimeout bounds a store write made after the caller's context may
// have ended: the outcome must be recorded either way.
const writeTimeout = 10 * time.Second

// maxAwait caps one await; a caller wanting longer awaits again.
const maxAwait = time.Hour

// Store upkeep.
const (
	// defaultLockWait bounds how long Configure waits for another process
	// to release the store: long enough for a killed or stopping plugin to
	// finish exiting, short enough to fail well within the host's
	// Configure deadline (30s).
	defaultLockWait = 10 * time.Second
	// pruneInterval is how often finished envelopes past the retention are
	// deleted while the plugin runs.
	pruneInterval = time.Hour
	// pruneBatch is the rows one prune statement deletes: about 10ms of the
	// write lock on a disk that syncs.
	pruneBatch = 1000
	// startPruneBudget bounds the prune Configure runs before serving; a
	// larger backlog is left to the periodic prune, which starts at once.
	startPruneBudget = 5 * time.Second
	// vacuumBudget bounds the one-time rewrite of a store created without
	// incremental auto-vacuum.
	vacuumBudget = 10 * time.Second
)

// The postgres backend's coordination between hosts.
const (
	// maxSweepInterval bounds how long a job whose lease passed waits for
	// a sweeper; a shorter lease sweeps at a tenth of it.
	maxSweepInterval = time.Second
	// pollInterval is how often a waiter re-reads its envelope besides
	// being woken by a notification: a lost notification only delays.
	pollInterval = 500 * time.Millisecond
	// relistenDelay is the pause before listening again after the
	// listening connection failed.
	relistenDelay = time.Second
)

// NewFamily serves Await only from an AwaitServer: this keeps a missing
// Await the compiler's error.
var _ aienvelope.AwaitServer = (*service)(nil)

// service serves the family. Configure swaps its instance; calls read the
// current one.
type service struct {
	mu     sync.RWMutex
	inst   *instance
	logger hclog.Logger
	// sleep and rand, when set, replace the retry policy's clock and
	// jitter (tests).
	sleep func(ctx context.Context, d time.Duration) error
	rand  func() float64
	// now, pruneEvery and lockWait, when set, replace the clock the prune
	// measures age by, pruneInterval and defaultLockWait (tests).
	now        func() time.Time
	pruneEvery time.Duration
	lockWait   time.Duration
	// pollEvery, when set, replaces pollInterval; noListen turns the
	// notifications off (tests of the postgres backend).
	pollEvery time.Duration
	noListen  bool
}

// instance is one configuration with its open store and job runner.
type instance struct {
	cfg    *settings
	store  store.Backend
	logger hclog.Logger
	// shared is the store when several processes use it (postgres), with
	// poll the interval waiters re-read at; nil and 0 for the embedded
	// store, whose only writer is this process.
	shared store.Shared
	poll   time.Duration
	// running counts the jobs started and not yet done, which a sweep
	// takes over no more than the free workers for.
	running atomic.Int64
	// coordinate runs the renewal, the sweeper and the listener; stopping
	// it (abandon) leaves this process's rows to the others, as a killed
	// process would.
	coordCancel context.CancelFunc
	coord       sync.WaitGroup
	// jobs runs async envelopes; ctx ends at shutdown.
	ctx    context.Context
	cancel context.CancelFunc
	jobs   sync.WaitGroup
	slots  chan struct{}
	// changed is closed and replaced whenever an envelope finishes, so
	// waiters wake, re-read their envelope and wait again if need be. One
	// broadcast channel keeps no per-envelope state to leak.
	waitMu  sync.Mutex
	changed chan struct{}
	// now is the clock the prune measures age by; pruned is closed when
	// the periodic prune has stopped (nil when retention is forever);
	// backlog says Configure's prune did not get through.
	now     func() time.Time
	pruned  chan struct{}
	backlog bool
}

func newPlugin() *plugin.Plugin {
	s := &service{logger: hclog.NewNullLogger()}
	return s.plugin()
}

func (s *service) plugin() *plugin.Plugin {
	return &plugin.Plugin{
		Name:         "wophost-aienvelope",
		Version:      "0.1.0",
		ConfigSchema: configSchema(),
		Configure:    s.configure,
		Shutdown:     s.shutdown,
		SingleWriter: true,
		Families:     []*plugin.Family{s.family()},
	}
}

// family serves generate and await; await is always served, answering
// capability_not_provided while async is off, and advertised by facets.
func (s *service) family() *plugin.Family {
	f := aienvelope.NewFamily(s)
	f.Status, f.Since, f.Witness = wop.StatusStable, "2.0", wop.WitnessGated
	f.Facets = s.facets
	return f
}

// facets advertises await only while async is on, so ctx.aiEnvelope.await
// exists exactly when it can be served. OpenWOP publishes it as the
// boolean true.
func (s *service) facets() map[string]any {
	if inst := s.current(); inst != nil && inst.cfg.async {
		return map[string]any{aienvelope.FacetAwait: true}
	}
	return nil
}

func (s *service) current() *instance {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.inst
}

func (s *service) configure(ctx context.Context, req *plugin.ConfigureRequest) error {
	cfg, err := parseConfig(req)
	if err != nil {
		return err
	}
	if s.sleep != nil {
		cfg.policy.Sleep = s.sleep
	}
	if s.rand != nil {
		cfg.policy.Rand = s.rand
	}
	logger := req.Logger
	if logger == nil {
		logger = s.logger
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The same store is reopened, so the old instance closes first.
	if s.inst != nil {
		s.inst.close()
		s.inst = nil
	}
	now := s.now
	if now == nil {
		now = time.Now
	}
	ictx, cancel := context.WithCancel(context.Background())
	inst := &instance{cfg: cfg, logger: logger, ctx: ictx, cancel: cancel,
		changed: make(chan struct{}), now: now}
	if req.Storage.Backend == plugin.StoragePostgres {
		err = s.openShared(ctx, req, inst)
	} else {
		err = s.openEmbedded(ctx, req, inst)
	}
	if err != nil {
		cancel()
		return err
	}
	if cfg.retention > 0 {
		inst.pruned = make(chan struct{})
		go inst.pruneLoop(cmp.Or(s.pruneEvery, pruneInterval), inst.backlog)
	}
	s.inst = inst
	return nil
}

// openEmbedded opens the SQLite store under the state directory and deals
// with what a previous process left pending.
func (s *service) openEmbedded(ctx context.Context, req *plugin.ConfigureRequest, inst *instance) error {
	for _, name := range inst.cfg.jobSettings {
		req.Warn([]string{"async", name}, name+" is not used",
			"the host's storage backend is embedded: one process runs every job, with async.workers at once")
	}
	// The store's lock is held from here until close: the recovery below
	// releases and re-runs pending envelopes, which is only right when no
	// other process is still working on them.
	lockWait := cmp.Or(s.lockWait, defaultLockWait)
	lctx, lcancel := context.WithTimeout(ctx, lockWait)
	st, err := store.Open(lctx, filepath.Join(req.StateDir, storeFile))
	lcancel()
	if err != nil {
		return wop.Errorf(wop.CodeUnavailable, "aiEnvelope store: %v", err)
	}
	inst.store = st
	inst.slots = make(chan struct{}, inst.cfg.workers)
	// Upkeep first: its one-time rewrite holds the write lock, which
	// resumed jobs would otherwise wait for to record their results.
	inst.backlog = inst.cfg.retention > 0 && !inst.upkeep(ctx)
	if err := inst.recover(ctx); err != nil {
		inst.close()
		return wop.Errorf(wop.CodeUnavailable, "aiEnvelope store: %v", err)
	}
	return nil
}

// openShared opens the plugin's schema of the shared database. Several
// processes use it at once, so nothing is locked and nothing recovered:
// the sweeper takes over what a stopped process left pending once its
// lease passed.
func (s *service) openShared(ctx context.Context, req *plugin.ConfigureRequest, inst *instance) error {
	pool, err := pgstore.Open(ctx, req.Storage, req.Storage.Schema, store.Migrations())
	if err != nil {
		return wop.Errorf(wop.CodeUnavailable, "aiEnvelope store: %v", err).WithRetryable(pgstore.Unavailable(err))
	}
	pg := store.NewPostgres(pool, req.Storage.Schema,
		store.PostgresOptions{Lease: inst.cfg.jobLease, Handoff: inst.cfg.jobWorkers == 0})
	inst.store, inst.shared = pg, pg
	inst.slots = make(chan struct{}, inst.cfg.jobWorkers)
	inst.poll = cmp.Or(s.pollEvery, pollInterval)
	inst.backlog = inst.cfg.retention > 0 && !inst.upkeep(ctx)
	cctx, ccancel := context.WithCancel(inst.ctx)
	inst.coordCancel = ccancel
	inst.coord.Add(2)
	go inst.renewLoop(cctx)
	go inst.sweepLoop(cctx)
	if !s.noListen {
		inst.coord.Add(1)
		go inst.listenLoop(cctx)
	}
	return nil
}

func (s *service) shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inst != nil {
		s.inst.close()
		s.inst = nil
	}
}

// close stops the job runner, leaving unfinished jobs pending for the
// next start, stops the periodic prune, and closes the store, which
// releases its lock.
func (in *instance) close() {
	in.cancel()
	in.jobs.Wait()
	in.coord.Wait()
	if in.pruned != nil {
		<-in.pruned
	}
	if in.shared != nil {
		// The jobs stopped above are another host's to run at once,
		// rather than once their leases pass.
		hctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		if err := in.shared.Handback(hctx); err != nil {
			in.logger.Warn("cannot hand the pending aiEnvelope jobs over to the other hosts; they take them over when the leases pass", "error", err)
		}
		cancel()
	}
	if err := in.store.Close(); err != nil {
		in.logger.Error("cannot close the aiEnvelope store", "error", err)
	}
}

// upkeep runs at Configure, before calls are served: a prune bounded by
// startPruneBudget, then, for a store created before incremental
// auto-vacuum, the one rewrite that lets it shrink. It reports whether the
// prune got through; a failure is logged, never fatal, because the store
// serves as well unpruned.
func (in *instance) upkeep(ctx context.Context) bool {
	pctx, cancel := context.WithTimeout(ctx, startPruneBudget)
	err := in.prune(pctx)
	cancel()
	switch {
	case err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		in.logger.Info("the aiEnvelope store has more to prune than fits the start; pruning continues in the background")
		return false
	case err != nil:
		in.logger.Warn("cannot prune the aiEnvelope store", "error", err)
		return false
	}
	c, ok := in.store.(store.Compactor)
	if !ok {
		return true
	}
	inc, err := c.Incremental(ctx)
	if err != nil {
		in.logger.Warn("cannot read the aiEnvelope store's vacuum mode", "error", err)
		return true
	}
	if inc {
		return true
	}
	before, _ := c.Size()
	t0 := time.Now()
	vctx, cancel := context.WithTimeout(ctx, vacuumBudget)
	defer cancel()
	if err := c.Vacuum(vctx); err != nil {
		in.logger.Warn("cannot rewrite the aiEnvelope store for incremental vacuum; its free pages are reused but the file does not shrink; retried at the next start",
			"error", err)
		return true
	}
	after, _ := c.Size()
	in.logger.Info("rewrote the aiEnvelope store with incremental vacuum", "bytes_before", before, "bytes_after", after,
		"took", time.Since(t0).Round(time.Millisecond))
	return true
}

// pruneLoop prunes every interval until the instance closes; at once
// first when Configure left a backlog.
func (in *instance) pruneLoop(every time.Duration, backlog bool) {
	defer close(in.pruned)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if !backlog {
			select {
			case <-in.ctx.Done():
				return
			case <-t.C:
			}
		}
		backlog = false
		if err := in.prune(in.ctx); err != nil && in.ctx.Err() == nil {
			in.logger.Warn("cannot prune the aiEnvelope store; trying again at the next interval", "error", err)
		}
	}
}

// prune deletes the envelopes that finished more than the retention ago
// and, when it got through them, gives the free space back (also what an
// earlier, interrupted prune freed). What it deleted stays deleted when it
// stops early with an error.
func (in *instance) prune(ctx context.Context) error {
	cutoff := in.now().Add(-in.cfg.retention)
	t0 := time.Now()
	n, err := in.store.Prune(ctx, cutoff, pruneBatch)
	c, compacts := in.store.(store.Compactor)
	if err == nil && compacts {
		if rerr := c.Reclaim(ctx); rerr != nil {
			in.logger.Warn("cannot give the aiEnvelope store's free pages back", "error", rerr)
		}
	}
	if n == 0 {
		return err
	}
	args := []any{"deleted", n, "finished_before", cutoff.UTC().Format(time.RFC3339), "took", time.Since(t0).Round(time.Millisecond)}
	if compacts {
		size, _ := c.Size()
		args = append(args, "store_bytes", size)
	}
	in.logger.Info("pruned finished envelopes", args...)
	return err
}

// recover deals with what a previous process left pending: an async job
// runs again (no result was recorded, so nothing is done twice on our
// side); a synchronous call is released, because its caller already got
// an error and will retry with the same key.
func (in *instance) recover(ctx context.Context) error {
	pending, err := in.store.Pending(ctx)
	if err != nil {
		return err
	}
	for _, e := range pending {
		if e.Async {
			in.logger.Info("resuming async envelope after a restart", "envelope_id", e.ID)
			in.start(e.ID, e.Request)
			continue
		}
		if err := in.store.Release(ctx, e.ID); err != nil {
			return err
		}
	}
	return nil
}

func newEnvelopeID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "env_" + hex.EncodeToString(b[:])
}

// Generate implements aienvelope.Server. A replayed result carries the
// stored bytes in Raw.
func (s *service) Generate(ctx context.Context, _ *plugin.Request, in *aienvelope.GenerateRequest) (*aienvelope.GenerateResult, error) {
	inst := s.current()
	if inst == nil {
		return nil, wop.Errorf(wop.CodeUnavailable, "the aiEnvelope plugin is not configured").WithRetryable(true)
	}
	p, err := inst.prepare(in)
	if err != nil {
		return nil, err
	}
	reqJSON, err := json.Marshal(in)
	if err != nil {
		return nil, wop.Errorf(wop.CodeInternal, "encode request: %v", err)
	}
	// A concurrent twin may release its claim (it failed); then claim again.
	for range 3 {
		e := &store.Envelope{Key: in.IdempotencyKey, Digest: p.digest, ID: newEnvelopeID(), Type: in.EnvelopeType,
			Async: in.Async, Request: reqJSON, CreatedAt: time.Now()}
		cur, claimed, err := inst.store.Claim(ctx, e)
		if err != nil {
			return nil, storeError(err)
		}
		if claimed {
			if in.Async {
				inst.start(e.ID, reqJSON)
				return pendingResult(in.EnvelopeType, e.ID, false), nil
			}
			return inst.runSync(ctx, e.ID, p)
		}
		if cur.Digest != p.digest {
			return nil, wop.Errorf(wop.CodeIdempotencyKeyMismatch,
				"idempotencyKey %q was first used with a different request (envelope %s)", in.IdempotencyKey, cur.ID).
				WithDetails(map[string]string{"envelopeId": cur.ID})
		}
		if cur.State != store.StatePending || in.Async {
			return inst.outcome(cur)
		}
		// The same request is in flight: wait for it.
		res, done, err := inst.wait(ctx, cur.ID, time.Time{})
		if err != nil || done {
			return res, err
		}
	}
	return nil, wop.Errorf(wop.CodeUnavailable, "idempotencyKey %q is contended; try again", in.IdempotencyKey).WithRetryable(true)
}

// runSync runs a claimed synchronous envelope. A failure releases the key:
// only successes are recorded for synchronous calls.
func (in *instance) runSync(ctx context.Context, id string, p *prepared) (*aienvelope.GenerateResult, error) {
	res, werr := in.run(ctx, id, p)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	defer in.notify()
	if werr != nil {
		if err := in.store.Release(wctx, id); err != nil {
			in.logger.Error("cannot release a failed envelope", "envelope_id", id, "error", err)
		}
		return nil, werr
	}
	if err := in.store.Complete(wctx, id, res, time.Now()); err != nil {
		// The caller still gets the result; a retry would call again.
		in.logger.Error("cannot record an envelope", "envelope_id", id, "error", err)
	}
	return &aienvelope.GenerateResult{Raw: res}, nil
}

// start runs an async envelope in the background, at most workers at once.
// With no workers (a shared store's job_workers = 0) it runs nothing: the
// store recorded the job for the other processes.
func (in *instance) start(id string, reqJSON []byte) {
	if cap(in.slots) == 0 {
		return
	}
	in.jobs.Add(1)
	in.running.Add(1)
	go func() {
		defer in.jobs.Done()
		defer in.running.Add(-1)
		select {
		case in.slots <- struct{}{}:
		case <-in.ctx.Done():
			return
		}
		defer func() { <-in.slots }()
		in.runJob(id, reqJSON)
	}()
}

func (in *instance) runJob(id string, reqJSON []byte) {
	defer in.notify()
	var req aienvelope.GenerateRequest
	var res json.RawMessage
	var werr *wop.Error
	if err := json.Unmarshal(reqJSON, &req); err != nil {
		werr = wop.Errorf(wop.CodeInternal, "stored request of envelope %s is unreadable: %v", id, err)
	} else if p, err := in.prepare(&req); err != nil {
		// The config may have changed since the job was accepted.
		werr = wop.AsError(err)
	} else {
		ctx, cancel := context.WithTimeout(in.ctx, in.cfg.jobTimeout)
		res, werr = in.run(ctx, id, p)
		cancel()
	}
	if in.ctx.Err() != nil {
		// Shutting down: the job stays pending and runs at the next start.
		return
	}
	wctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	var err error
	if werr != nil {
		b, _ := json.Marshal(werr)
		err = in.store.Fail(wctx, id, b, time.Now())
	} else {
		err = in.store.Complete(wctx, id, res, time.Now())
	}
	if err != nil {
		in.logger.Error("cannot record an async envelope", "envelope_id", id, "error", err)
	}
}

// run calls the provider under the retry policy and builds the result.
func (in *instance) run(ctx context.Context, id string, p *prepared) (json.RawMessage, *wop.Error) {
	var resp *provider.Response
	attempts, err := in.cfg.policy.Do(ctx, func(ctx context.Context) error {
		r, err := p.backend.p.Generate(ctx, p.call)
		if err == nil {
			resp = r
		}
		return err
	})
	if err != nil {
		return nil, providerError(ctx, err, attempts)
	}
	return p.result(id, resp)
}

// providerError converts a backend failure into the error envelope.
func providerError(ctx context.Context, err error, attempts int) *wop.Error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return wop.Errorf(wop.CodeDeadlineExceeded, "the call's deadline passed after %d provider attempt(s): %v", attempts, err)
		}
		return wop.Errorf(wop.CodeCancelled, "the call was cancelled")
	}
	var pe *provider.Error
	if errors.As(err, &pe) {
		we := pe.WOP()
		if attempts > 1 {
			we.Message = fmt.Sprintf("%s (after %d attempts)", we.Message, attempts)
		}
		return we
	}
	return wop.Errorf(wop.CodeInternal, "provider call failed: %v", err)
}

// outcome turns a finished (or pending) stored envelope into the answer.
func (in *instance) outcome(e *store.Envelope) (*aienvelope.GenerateResult, error) {
	switch e.State {
	case store.StateCompleted:
		return &aienvelope.GenerateResult{Raw: e.Result}, nil
	case store.StateFailed:
		var we wop.Error
		if err := json.Unmarshal(e.Error, &we); err != nil || we.Code == "" {
			return nil, wop.Errorf(wop.CodeInternal, "envelope %s failed with an unreadable error", e.ID)
		}
		return nil, &we
	}
	return pendingResult(e.Type, e.ID, false), nil
}

func pendingResult(envelopeType, id string, timedOut bool) *aienvelope.GenerateResult {
	return &aienvelope.GenerateResult{EnvelopeType: envelopeType, EnvelopeID: id, Status: aienvelope.StatusPending, TimedOut: timedOut}
}

// waitChan returns the channel closed when the next envelope finishes.
func (in *instance) waitChan() <-chan struct{} {
	in.waitMu.Lock()
	defer in.waitMu.Unlock()
	return in.changed
}

// notify wakes every waiter after an envelope finished.
func (in *instance) notify() {
	in.waitMu.Lock()
	defer in.waitMu.Unlock()
	close(in.changed)
	in.changed = make(chan struct{})
}

// wait waits for envelope id until it finishes, ctx ends or until (zero:
// no limit of its own). done is false when the envelope vanished (a
// synchronous twin failed and released its key).
func (in *instance) wait(ctx context.Context, id string, until time.Time) (res *aienvelope.GenerateResult, done bool, err error) {
	var timer <-chan time.Time
	if !until.IsZero() {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		timer = t.C
	}
	var poll <-chan time.Time
	if in.poll > 0 {
		t := time.NewTicker(in.poll)
		defer t.Stop()
		poll = t.C
	}
	for {
		ch := in.waitChan()
		e, err := in.store.Get(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, true, storeError(err)
		}
		if e.State != store.StatePending {
			res, err := in.outcome(e)
			return res, true, err
		}
		select {
		case <-ch:
		case <-poll:
		case <-timer:
			return pendingResult("", id, true), true, nil
		case <-ctx.Done():
			return nil, true, ctxError(ctx.Err())
		}
	}
}

func ctxError(err error) *wop.Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return wop.Errorf(wop.CodeDeadlineExceeded, "the call's deadline passed")
	}
	return wop.Errorf(wop.CodeCancelled, "the call was cancelled")
}

func storeError(err error) *wop.Error {
	return wop.Errorf(wop.CodeUnavailable, "aiEnvelope store: %v", err).WithRetryable(true)
}

// Await implements aienvelope.AwaitServer.
func (s *service) Await(ctx context.Context, _ *plugin.Request, in *aienvelope.AwaitRequest) (*aienvelope.GenerateResult, error) {
	inst := s.current()
	if inst == nil {
		return nil, wop.Errorf(wop.CodeUnavailable, "the aiEnvelope plugin is not configured").WithRetryable(true)
	}
	if !inst.cfg.async {
		return nil, wop.NotProvided(aienvelope.CapabilityAwait)
	}
	if in.EnvelopeID == "" {
		return nil, wop.Errorf(wop.CodeValidation, `field "envelopeId": must not be empty`)
	}
	if in.TimeoutMs < 0 {
		return nil, wop.Errorf(wop.CodeValidation, `field "timeoutMs": must not be negative`)
	}
	// Clamp before converting: a huge timeoutMs would overflow a Duration.
	timeout := time.Duration(min(in.TimeoutMs, maxAwait.Milliseconds())) * time.Millisecond
	until := time.Now().Add(timeout)
	// Answer "still pending" a little before the caller's deadline, so the
	// answer arrives instead of a deadline error.
	if dl, ok := ctx.Deadline(); ok {
		margin := min(time.Until(dl)/10, 250*time.Millisecond)
		if cut := dl.Add(-margin); cut.Before(until) {
			until = cut
		}
	}
	res, found, err := inst.wait(ctx, in.EnvelopeID, until)
	if err == nil && !found {
		return nil, wop.Errorf(wop.CodeNotFound, "no envelope %q", in.EnvelopeID)
	}
	return res, err
}
