package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/core/wasm"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// watchPack waits for an admitted pack's process to exit. An exit the
// host did not ask for withdraws the pack's nodes and starts the restart
// loop, with the backoff and crash_limit of plugins. Meanwhile it checks
// the process's health like a plugin's (checkHealth): a pack that stops
// answering is killed and handled as a crash.
func (h *Host) watchPack(p *Pack, proc *loader.Pack) {
	if proc == nil {
		return
	}
	h.watchers.Add(2)
	go func() {
		defer h.watchers.Done()
		h.checkHealth(healthTarget{
			kind: "pack", key: "pack", name: p.Name,
			check: proc.CheckHealth, exited: proc.Exited(),
			owned: func() bool {
				p.live.Lock()
				defer p.live.Unlock()
				return p.proc == proc
			},
			kill: func(why error) {
				p.live.Lock()
				p.killedFor = why
				p.live.Unlock()
				proc.Abort()
			},
		})
	}()
	go func() {
		defer h.watchers.Done()
		select {
		case <-proc.Exited():
		case <-h.done:
			return
		}
		p.live.Lock()
		if h.isClosing() || p.proc != proc {
			p.live.Unlock()
			return
		}
		why := p.killedFor
		p.killedFor = nil
		if why == nil {
			why = exitedUnexpectedly("pack", proc.LastWords())
			h.logger.Error("pack exited unexpectedly", "pack", p.Name, "error", why)
		}
		p.State, p.Err = PackCrashed, why
		n := p.crashes.add(time.Now(), h.cfg.Host.CrashWindow)
		p.live.Unlock()
		// The process is gone, but its client side is not until killed.
		proc.Kill()
		if limit, window := h.cfg.Host.CrashLimit, h.cfg.Host.CrashWindow; n >= limit {
			h.failPack(p, fmt.Errorf("crashed %d times within %s (crash_limit = %d); not restarted until the host restarts or reloads", n, window, limit))
			return
		}
		h.restartPack(p)
	}()
}

// restartPack brings a crashed pack back: a new process whose embedded
// manifest still matches, then its nodes again.
func (h *Host) restartPack(p *Pack) {
	policy := h.options.Restart
	delay := policy.Base
	var last error
	for n := 1; n <= policy.Attempts; n++ {
		p.live.Lock()
		p.State = PackRestarting
		p.restarts++
		p.live.Unlock()
		select {
		case <-policy.After(delay):
		case <-h.done:
			return
		}
		delay = policy.next(delay)
		ctx, cancel := context.WithTimeout(context.Background(), h.opts.StartTimeout+rpcGrace)
		proc, err := h.startPackProcess(ctx, p)
		cancel()
		if err != nil {
			if proc != nil {
				proc.Kill()
			}
			h.logger.Warn("pack restart failed", "pack", p.Name, "attempt", n, "error", err)
			last = err
			continue
		}
		p.live.Lock()
		if h.isClosing() {
			p.live.Unlock()
			proc.Kill()
			return
		}
		p.proc, p.Err = proc, nil
		p.State = PackReady
		if len(p.Degraded) > 0 {
			p.State = PackDegraded
		}
		p.live.Unlock()
		h.logger.Info("pack restarted", "pack", p.Name, "attempt", n)
		h.watchPack(p, proc)
		return
	}
	h.failPack(p, gaveUp(policy.Attempts, last))
}

// rpcGrace is what a pack restart allows beyond start_timeout for reading
// the binary's manifest.
const rpcGrace = 10 * time.Second

// failPack leaves p failed: its nodes are refused until the host restarts
// or reloads.
func (h *Host) failPack(p *Pack, err error) {
	p.live.Lock()
	p.State, p.Err = PackFailed, err
	p.live.Unlock()
	h.logger.Error("pack failed", "pack", p.Name, "error", err)
}

// runnable returns p's process, or a WebAssembly pack's module, when p
// may run nodes now, and otherwise the
// error that refuses the run: retryable while the pack restarts, not once
// the host gave up on it.
func (p *Pack) runnable(typeID string) (*loader.Pack, *wasm.Module, error) {
	p.live.Lock()
	defer p.live.Unlock()
	if (p.State == PackReady || p.State == PackDegraded) && (p.proc != nil || p.module != nil) {
		return p.proc, p.module, nil
	}
	why := ""
	if p.Err != nil {
		why = ": " + p.Err.Error()
	}
	return nil, nil, wop.Errorf(wop.CodeUnavailable, "pack %s is %s%s", p.Name, p.State, why).
		WithRetryable(p.State != PackFailed).
		WithDetails(map[string]string{"pack": p.Name, "typeId": typeID, "state": string(p.State)})
}

// execute runs one node on p's process, serving HostServices to the
// process at its first run. A process that went away during the run makes
// the run unavailable, retryable, in the pack's name.
func (h *Host) execute(ctx context.Context, p *Pack, proc *loader.Pack, req *wophostv1.ExecuteRequest) ([]byte, *wophostv1.DirectCallLog, error) {
	p.live.Lock()
	if p.served != proc {
		proc.ServeHostServices(p.hostServices, h.cfg.Host.MaxMessageBytes)
		p.served = proc
	}
	p.live.Unlock()
	out, account, err := proc.Execute(ctx, req)
	if err != nil {
		h.noteViolation(p, req.GetTypeId(), err)
	}
	if err != nil && ctx.Err() == nil && (errors.Is(err, loader.ErrUnreachable) || proc.Gone()) {
		if breach := h.memoryExceeded(p, proc, req.GetTypeId()); breach != nil {
			return nil, nil, breach
		}
		h.logger.Debug("pack unreachable during a run", "pack", p.Name, "type_id", req.GetTypeId(), "error", err)
		return nil, nil, wop.Errorf(wop.CodeUnavailable, "pack %s exited during the run of %s", p.Name, req.GetTypeId()).
			WithRetryable(true).WithDetails(map[string]string{"pack": p.Name, "typeId": req.GetTypeId()})
	}
	return out, account, err
}

// stopPack stops p's process, if any, for good.
func stopPack(p *Pack) {
	p.live.Lock()
	proc, mod := p.proc, p.module
	p.live.Unlock()
	if proc != nil {
		proc.Kill()
	}
	if mod != nil {
		// Runs still on an instance end with it; closing only frees memory.
		_ = mod.Close(context.Background())
	}
}
