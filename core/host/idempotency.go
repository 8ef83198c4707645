package host

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/httpstatus"
	"github.com/wophost/wophost/core/idempotency"
	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/sdk/wop"
)

// leaseGrace is added to a run's deadline to make the lease of its
// claim in a store that is not renewed (the embedded backend): long
// enough for the run to record its outcome after its deadline, so that a
// claim is only taken over from a host that is gone.
const leaseGrace = time.Minute

// claimLeases are the claims a host has in flight in a store whose claims
// are leased (idempotency.Leaser). One renewer per host renews them all in
// one statement every third of the lease: a host with hundreds of keyed
// requests in flight costs the database one UPDATE per interval, not one
// per request, and takes one connection of its pool, not one per request.
// Only claims whose requests still run are renewed, so a claim whose
// release failed is still freed when its lease ends.
type claimLeases struct {
	lease time.Duration
	mu    sync.Mutex
	// held maps a claim's owner to its ID and whether a renewal found it
	// taken over.
	held map[string]*leasedClaim
}

type leasedClaim struct {
	id   string
	lost bool
}

func newClaimLeases(lease time.Duration) *claimLeases {
	if lease <= 0 {
		lease = config.DefaultClaimLease
	}
	return &claimLeases{lease: lease, held: map[string]*leasedClaim{}}
}

// add starts renewing the claim id of owner.
func (c *claimLeases) add(id, owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held[owner] = &leasedClaim{id: id}
}

// drop stops renewing owner's claim and reports whether a renewal found
// it taken over.
func (c *claimLeases) drop(owner string) (lost bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.held[owner]
	delete(c.held, owner)
	return h != nil && h.lost
}

// list returns the claims to renew: those in flight not yet found lost.
func (c *claimLeases) list() []idempotency.Held {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]idempotency.Held, 0, len(c.held))
	for owner, h := range c.held {
		if !h.lost {
			out = append(out, idempotency.Held{ID: h.id, Owner: owner})
		}
	}
	return out
}

// markLost records that owner's claim was taken over, and reports whether
// its request is still in flight (a claim settled meanwhile is not lost:
// it was completed or released).
func (c *claimLeases) markLost(owner string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.held[owner]
	if h == nil {
		return false
	}
	h.lost = true
	return true
}

// renewClaims renews the host's leased claims every third of the lease
// until ctx ends.
func (s *state) renewClaims(ctx context.Context) {
	t := time.NewTicker(s.claims.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.renewOnce(ctx)
		}
	}
}

// renewOnce renews the claims in flight once. A renewal that fails is
// tried again at the next tick: the claims stay the host's until their
// lease ends. A claim the renewal does not find under its owner was taken
// over by another host after its lease ended: its run's outcome is not
// recorded (settle).
func (s *state) renewOnce(ctx context.Context) {
	held := s.claims.list()
	if len(held) == 0 {
		return
	}
	s.mu.Lock()
	leaser, ok := s.store.(idempotency.Leaser)
	s.mu.Unlock()
	if !ok {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, s.claims.lease/3)
	defer cancel()
	renewed, err := leaser.Renew(rctx, held, s.now().UTC().Add(s.claims.lease))
	if err != nil {
		s.logger.Warn("idempotency claims not renewed; trying again", "claims", len(held), "error", err)
		return
	}
	for _, h := range held {
		if !renewed[h.Owner] && s.claims.markLost(h.Owner) {
			s.logger.Error("an idempotency claim of a run in flight was taken over by another host after its lease ended; this run's outcome will not be recorded under the key")
		}
	}
}

// runKeyed runs a node under an idempotency key; see state.runKeyed.
func (h *Host) runKeyed(ctx context.Context, typeID string, input json.RawMessage, opts RunOptions) (*RunResult, error) {
	res, err := h.state.runKeyed(ctx, typeID, input, opts, h.runBound(ctx, opts), func() (*RunResult, error) {
		return h.run(ctx, typeID, input, opts)
	})
	if res != nil && res.Replayed && opts.Replay != nil && res.RunID != "" {
		// The kept answer of a replay carries its summary, which the
		// replay's own record holds.
		if rec, rerr := h.RunRecord(ctx, res.RunID); rerr == nil {
			res.Replay = rec.Replay
		}
	}
	return res, err
}

// runKeyed runs a node through run under an idempotency key (OpenWOP's
// Layer 1): a repeat of the same request gets the recorded final outcome
// without running the node, a different request under the key is
// idempotency_key_mismatch, a repeat while the first still runs is
// idempotency_in_flight (retryable), and of two concurrent requests
// exactly one runs. Only final outcomes are kept (httpstatus.Kept): a
// success, a failed run whose error is not retryable, a refusal OpenWOP's
// HTTP rules keep; any other outcome releases the key, so that its repeat
// runs. bound is
// how long the run may take, for the lease of its claim.
func (s *state) runKeyed(ctx context.Context, typeID string, input json.RawMessage, opts RunOptions, bound time.Duration, run func() (*RunResult, error)) (*RunResult, error) {
	if err := idempotency.CheckKey(opts.IdempotencyKey); err != nil {
		return nil, err
	}
	id := idempotency.ID(opts.IdempotencyScope, opts.IdempotencyKey)
	digest := idempotency.RequestDigest(typeID, input)
	if opts.Replay != nil {
		// A replay is asked for by its source run and its live calls; the
		// recorded node and input follow from the source.
		digest = idempotency.ReplayDigest(opts.Replay.RunID, opts.Live)
	}
	ttl := s.retention.IdempotencyKeys
	store, err := s.idempotencyStore()
	if err != nil {
		s.writeFailed(StoreIdempotencyKeys, err)
		return nil, refusal(err)
	}

	// What the key already holds is answered without writing anything, so
	// repeats are answered even while the directory takes no writes.
	held := s.unsavedRecord(id)
	if held == nil {
		held, err = store.Get(ctx, id)
		if errors.Is(err, idempotency.ErrNotFound) {
			held, err = nil, nil
		}
		if err != nil {
			s.logger.Error("idempotency record unreadable", "error", err)
			if pgstore.Unavailable(err) {
				return nil, refusal(err) // the database is out of reach: retryable, naming it
			}
			return nil, wop.Errorf(wop.CodeUnavailable, "the outcome of this idempotency key cannot be read; the run was refused before it started").WithRetryable(true)
		}
	}
	now := s.now().UTC()
	if held != nil && held.Live(now, ttl) {
		return s.answer(held, digest, typeID)
	}

	if err := s.writable(); err != nil {
		return nil, err
	}
	if n, full := s.keysFull(); full {
		return nil, wop.Errorf(wop.CodeUnavailable,
			"the host holds %d idempotency keys (retention max_idempotency_keys); a new key is accepted once older keys expire", n).
			WithRetryable(true).WithDetails(map[string]string{"storage": StoreIdempotencyKeys})
	}
	// A leased claim is renewed while the run goes on; any other is held
	// until the run's deadline and a grace, and not a moment longer.
	_, leased := store.(idempotency.Leaser)
	lease := bound + leaseGrace
	if leased {
		lease = s.claims.lease
	}
	claim := &idempotency.Record{
		ID: id, State: idempotency.StatePending, Request: digest, TypeID: typeID,
		Owner: dispatch.NewID("claim"), CreatedAt: now, LeaseUntil: now.Add(lease),
	}
	held, err = store.Claim(ctx, claim, now, ttl)
	if err != nil {
		s.writeFailed(StoreIdempotencyKeys, err)
		s.logger.Error("idempotency claim not written", "error", err)
		return nil, refusal(err)
	}
	if held != nil {
		return s.answer(held, digest, typeID)
	}
	s.claimed()
	if leased {
		s.claims.add(claim.ID, claim.Owner)
	}
	res, runErr := run()
	s.settle(store, claim, res, runErr)
	return res, runErr
}

// runBound is how long a run with opts may last from now: its timeout,
// or the host's run_timeout, or the caller's earlier deadline.
func (h *Host) runBound(ctx context.Context, opts RunOptions) time.Duration {
	bound := opts.Timeout
	if bound <= 0 {
		bound = h.cfg.Host.RunTimeout
	}
	if d, ok := ctx.Deadline(); ok && (bound <= 0 || time.Until(d) < bound) {
		bound = time.Until(d)
	}
	return max(bound, 0)
}

// answer is the reply to a request whose key a live record holds.
func (s *state) answer(rec *idempotency.Record, digest, typeID string) (*RunResult, error) {
	if rec.Request != digest {
		return nil, wop.Errorf(idempotency.CodeKeyMismatch,
			"this idempotency key was used for a different request (another node or another input); a new request needs a new key")
	}
	if rec.State == idempotency.StatePending {
		return nil, wop.Errorf(idempotency.CodeInFlight,
			"the first request with this idempotency key is still running; repeat the request to get its outcome").WithRetryable(true)
	}
	if o := s.observer(); o != nil {
		o.IdempotentReplay(typeID)
	}
	res := &RunResult{RunID: rec.RunID, Output: rec.Output, RecordPath: rec.RunRecord, Replayed: true}
	if rec.Error != nil {
		return res, rec.Error
	}
	return res, nil
}

// settle records the final outcome of a keyed run, or releases the key
// when the outcome is not final. A record that cannot be written is
// kept in memory and answered from there until it can be.
func (s *state) settle(store idempotency.Store, claim *idempotency.Record, res *RunResult, runErr error) {
	ctx := context.Background()
	if s.claims.drop(claim.Owner) {
		// Another host holds the key now and answers it with its own
		// run's outcome: neither recorded, released nor kept here.
		s.logger.Warn("the outcome of a run whose idempotency claim was taken over is not recorded")
		return
	}
	we := wop.AsError(runErr)
	if !httpstatus.Kept(res != nil && res.RunID != "", runErr) {
		switch err := store.Release(ctx, claim.ID, claim.Owner); {
		case err == nil:
			s.released()
		case errors.Is(err, idempotency.ErrNotOwner):
			s.logger.Warn("idempotency claim already gone at release")
		default:
			// The key stays claimed until its lease ends: repeats get
			// idempotency_in_flight until then, never a second run at once.
			s.logger.Error("idempotency claim not released", "error", err)
		}
		return
	}
	done := *claim
	done.State = idempotency.StateDone
	done.CompletedAt = s.now().UTC()
	if res != nil {
		done.RunID, done.RunRecord = res.RunID, res.RecordPath
		if runErr == nil {
			done.Output = res.Output
		}
	}
	done.Error = we
	switch err := store.Complete(ctx, &done); {
	case err == nil:
	case errors.Is(err, idempotency.ErrNotOwner):
		s.logger.Error("idempotency outcome not recorded: the claim's lease ended and another request took the key over", "run_id", done.RunID)
	default:
		s.logger.Error("idempotency outcome not written; it is answered from memory and written once the state directory takes writes",
			"run_id", done.RunID, "error", err)
		s.writeFailed(StoreIdempotencyKeys, err)
		s.keep(&done)
	}
}
