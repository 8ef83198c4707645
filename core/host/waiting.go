package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/wophost/wophost/core/hostservices"
	"github.com/wophost/wophost/core/loader"
	"github.com/wophost/wophost/sdk/wop"
)

// waitable reports whether err, a refused Configure of proc, may pass by
// itself: the plugin answered unavailable, which is retryable by
// definition (its database is out of reach, say). A process that exited
// answers unavailable too, through the transport; that is a crash, which
// watch handles.
func waitable(err error, proc *loader.Capability) bool {
	var we *wop.Error
	if !errors.As(err, &we) || we.Code != wop.CodeUnavailable || !we.Retryable {
		return false
	}
	return !exited(proc)
}

// wait keeps c's process proc running but not ready: its families are
// withdrawn and its record says what it waits for.
func (h *Host) wait(c *capability, proc *loader.Capability, err error) {
	c.mu.Lock()
	already := c.waiting && c.proc == proc
	c.waiting = true
	c.mu.Unlock()
	h.reg.Wait(c.cfg.Name, err)
	if already {
		h.logger.Debug("capability still waiting", "capability", c.cfg.Name, "error", err)
		return
	}
	h.logger.Warn("capability waiting: its plugin cannot reach what it needs yet; configuring it again with backoff",
		"capability", c.cfg.Name, "error", err)
}

func (c *capability) isWaiting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
}

// servicesFor returns the host services proc was given at an earlier
// Configure, nil when it was given none.
func (c *capability) servicesFor(proc *loader.Capability) *hostservices.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.servedTo != proc {
		return nil
	}
	return c.services
}

// handServices records that proc was given srv. The plugin dials the
// services it is given once, so a later Configure of the same process
// hands nothing new.
func (c *capability) handServices(proc *loader.Capability, srv *hostservices.Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.servedTo, c.services = proc, srv
}

// awaitConfigure configures the waiting process proc again, with the
// restart policy's backoff (capped, never given up), until it takes its
// configuration (c is ready), refuses it for good (c failed), or is gone:
// it exited (watch restarts it, a crash like any other), a reload retired
// it, or the host is closing. The attempts restart nothing, so they count
// neither as crashes nor as restarts.
func (h *Host) awaitConfigure(c *capability, proc *loader.Capability) {
	h.watchers.Add(1)
	go func() {
		defer h.watchers.Done()
		policy := h.options.Restart
		for delay := policy.Base; ; delay = policy.next(delay) {
			select {
			case <-policy.After(delay):
			case <-proc.Exited():
				return
			case <-h.done:
				return
			}
			if !h.configureAgain(c, proc) {
				return
			}
		}
	}()
}

// configureAgain makes one attempt and reports whether proc still waits.
func (h *Host) configureAgain(c *capability, proc *loader.Capability) bool {
	// As a restart does: a reload retiring c waits for the attempt.
	c.starting.Lock()
	defer c.starting.Unlock()
	if h.isClosing() || !c.owns(proc) || !c.isWaiting() {
		return false
	}
	_, waiting := h.configure(context.Background(), c)
	return waiting
}

// requiredWaiting is the diagnostic of a required capability that is
// waiting when the host has started: `host serve` serves without it (it
// is not ready, so /readyz answers 503) while the host keeps configuring
// it; a one-shot command, which would otherwise wait for as long as the
// outage lasts, stops at once.
func requiredWaiting(c *capability) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Required capability is waiting",
		Detail: fmt.Sprintf("Capability %q is marked required but its plugin cannot reach what it needs yet (see its error above); "+
			"the host configures it again with backoff and it becomes ready by itself once that is back.", c.cfg.Name),
		Subject: c.cfg.DefRange.Ptr(),
	}
}
