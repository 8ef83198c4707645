package wasm

import (
	"context"
	"sync"
)

// pool keeps instances instantiated ahead of invocations. Each is taken by
// one invocation and closed after it; every take, and every miss, asks the
// filler for one more, so that the pool refills itself after failures too.
type pool struct {
	m      *Module
	ready  chan *instance
	wanted chan struct{}
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// startPool starts filling size instances in the background; size 0 makes
// a pool that is always empty.
func startPool(m *Module, size int) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pool{m: m, ready: make(chan *instance, size), wanted: make(chan struct{}, size), cancel: cancel}
	if size == 0 {
		return p
	}
	for range size {
		p.wanted <- struct{}{}
	}
	p.done.Add(1)
	go p.fill(ctx)
	return p
}

func (p *pool) fill(ctx context.Context) {
	defer p.done.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wanted:
		}
		inst, err := p.warm(ctx)
		if err != nil {
			if ctx.Err() == nil {
				p.m.logger.Warn("a warm instance could not be made; the next invocation instantiates its own", "pack", p.m.packName, "error", err)
			}
			continue
		}
		select {
		case p.ready <- inst:
		default:
			inst.close(ctx)
		}
	}
}

// warm makes one instance under the pack's caps, with no invocation bound.
func (p *pool) warm(ctx context.Context) (*instance, error) {
	bctx, b := startBudget(ctx, p.m.limits.MaxExecution)
	st := &callState{budget: b, logger: p.m.logger}
	inst, err := p.m.instantiate(withState(bctx, st))
	b.stop()
	if err != nil {
		inst.close(ctx)
		return nil, err
	}
	return inst, nil
}

// take answers a warm instance, or nil when none is ready; either way it
// asks for one more.
func (p *pool) take() *instance {
	var inst *instance
	select {
	case inst = <-p.ready:
	default:
	}
	select {
	case p.wanted <- struct{}{}:
	default:
	}
	return inst
}

// close stops the filler and closes the instances still waiting.
func (p *pool) close(ctx context.Context) {
	p.cancel()
	p.done.Wait()
	for {
		select {
		case inst := <-p.ready:
			inst.close(ctx)
		default:
			return
		}
	}
}
