package main

import (
	"context"
	"time"
)

// renewLoop renews this process's leases every third of the lease, so a
// renewal may fail twice before another process takes a row over.
func (in *instance) renewLoop(ctx context.Context) {
	defer in.coord.Done()
	t := time.NewTicker(in.cfg.jobLease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := in.shared.Renew(ctx); err != nil && ctx.Err() == nil {
			in.logger.Warn("cannot renew the leases of the pending aiEnvelope envelopes; trying again", "error", err)
		}
	}
}

// sweepLoop sweeps at once, then every tenth of the lease (at most
// maxSweepInterval): it releases the synchronous envelopes whose caller's
// process stopped and runs the jobs whose process stopped, as many as
// this process has free workers for.
func (in *instance) sweepLoop(ctx context.Context) {
	defer in.coord.Done()
	t := time.NewTicker(min(in.cfg.jobLease/10, maxSweepInterval))
	defer t.Stop()
	for {
		// A host with async off takes no jobs over: its config would
		// refuse them.
		free := int64(0)
		if in.cfg.async {
			free = int64(cap(in.slots)) - in.running.Load()
		}
		jobs, err := in.shared.Sweep(ctx, int(max(free, 0)))
		if err != nil && ctx.Err() == nil {
			in.logger.Warn("cannot sweep the pending aiEnvelope envelopes; trying again", "error", err)
		}
		for _, e := range jobs {
			in.logger.Info("taking over an async envelope whose host stopped", "envelope_id", e.ID)
			in.start(e.ID, e.Request)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// listenLoop wakes the waiters whenever an envelope finishes in any
// process, listening again after a lost connection; waiters poll too, so
// what is missed meanwhile only comes later.
func (in *instance) listenLoop(ctx context.Context) {
	defer in.coord.Done()
	for {
		err := in.shared.Listen(ctx, in.notify)
		if ctx.Err() != nil {
			return
		}
		in.logger.Warn("lost the aiEnvelope store's notifications; listening again", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(relistenDelay):
		}
	}
}
