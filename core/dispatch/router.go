// Package dispatch routes host-service calls to the plugins that serve
// them and runs pack nodes, applying the contract's checks on every call:
// advertisement, least privilege, depth, deadline and size.
package dispatch

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/tracing"
	"github.com/wophost/wophost/sdk/wop"
)

// Operator is the Caller name of the operator's own calls (host call,
// host prompts). Only the host gives it.
const Operator = "operator"

// Caller is who makes a host-service call.
type Caller struct {
	// Name is "pack:<name>", "plugin:<name>" or Operator.
	Name string
	// Allowed reports whether the caller may call family (and facet).
	Allowed func(family, facet string) bool
	// Agent is set when a plugin calls on behalf of an agent it runs.
	Agent *Agent
	// RunsAgents is set for the plugin that runs agents.
	RunsAgents bool
}

// deadlineSlack is how much later than a call's deadline the caller's
// context may end and still stand for that deadline. gRPC carries a
// deadline as a timeout, rounded up to its unit (a millisecond for one
// more than 100 s away) and counted again from the message's arrival, so
// the context of a call a pack makes ends a little after the run's
// deadline, which the call context carries exactly. A timer of the
// router's own for that difference cost six allocations a call. The
// call context still hands the exact deadline to the plugin, which holds
// its handler to it.
const deadlineSlack = 5 * time.Millisecond

// Router sends host-service calls to the plugin serving each family.
type Router struct {
	reg        *registry.Registry
	depthLimit int
	maxBytes   int
	// policies wrap the calls of one family with host-side checks, after
	// the router's own (see SetPolicy).
	policies map[string]Policy
	tracer   trace.Tracer
	// traced is false while tracer is the no-op one.
	traced   bool
	observer Observer
	// journal logs the calls of tracked runs and answers replays.
	journal *Journal
}

// Observer is told of every call the router handles (metrics).
type Observer interface {
	// CallStarted is called as a call arrives; the func it returns is
	// called with the call's outcome.
	CallStarted(family, method string) func(err error)
}

// NewRouter returns a router over reg. depthLimit bounds how many
// host-service hops one call may take; maxBytes bounds a payload.
func NewRouter(reg *registry.Registry, depthLimit, maxBytes int) *Router {
	return &Router{reg: reg, depthLimit: depthLimit, maxBytes: maxBytes, policies: map[string]Policy{},
		tracer: noop.NewTracerProvider().Tracer("")}
}

// SetTracer makes every routed call a span of tracer. Call it before the
// router serves any call.
func (r *Router) SetTracer(t trace.Tracer) {
	r.tracer, r.traced = t, tracing.Enabled(t)
}

// SetObserver reports every routed call to o. Call it before the router
// serves any call.
func (r *Router) SetObserver(o Observer) { r.observer = o }

// SetJournal logs every call of a run j tracks in its invocation log, and
// answers a replayed run's calls from its source (Journal). Call it before
// the router serves any call.
func (r *Router) SetJournal(j *Journal) { r.journal = j }

// Observer returns the observer SetObserver set, or nil.
func (r *Router) Observer() Observer { return r.observer }

// SetPolicy wraps every call to family that passes the router's checks
// with p. Call it before the router serves any call.
func (r *Router) SetPolicy(family string, p Policy) {
	r.policies[family] = p
}

// Call routes one call. call must already carry the authoritative run
// context and the depth of this hop.
func (r *Router) Call(ctx context.Context, caller Caller, family, method string, payload []byte, call wop.CallContext) (out []byte, err error) {
	// With tracing off the span is a no-op and the traceparent passes
	// through as it came; the span's name is not even built.
	var span trace.Span = noop.Span{}
	if r.traced {
		ctx, span, call.Traceparent = tracing.Start(ctx, r.tracer, call.Traceparent, "route "+family+"."+method, trace.SpanKindInternal)
	}
	var done func(error)
	if r.observer != nil {
		done = r.observer.CallStarted(family, method)
	}
	defer func() {
		if done != nil {
			done(err)
		}
		tracing.End(span, err, wop.CodeOf(err))
	}()
	// The journal sees the call before any check and its outcome after
	// all of them, so that a replay notices a refusal that is new. Its
	// defer runs before the one above, which sees the outcome it returns.
	pending := r.journal.begin(caller, family, method, payload, call)
	if pending != nil {
		defer func() { out, err = pending.finish(out, err) }()
	}
	if len(payload) > r.maxBytes {
		return nil, wop.Errorf(wop.CodeValidation, "request of %d bytes is over the %d-byte limit", len(payload), r.maxBytes).WithCapability(capabilityName(family, method))
	}
	if call.Depth > r.depthLimit {
		return nil, wop.Errorf(wop.CodeCallDepthExceeded, "call depth %d is over the limit of %d", call.Depth, r.depthLimit).WithCapability(capabilityName(family, method))
	}
	// Least privilege comes before advertisement: an undeclared call is
	// capability_not_declared whether or not the host serves the family,
	// so a caller cannot probe what the host serves without declaring it.
	facet := wop.RequiredFacet(family, method, payload)
	if caller.Allowed != nil && !caller.Allowed(family, facet) {
		what := family
		if facet != "" {
			what += "." + facet
		}
		return nil, wop.Errorf(wop.CodeCapabilityNotDeclared, "%s did not declare %s", caller.Name, what).WithCapability(capabilityName(family, method))
	}
	// An operator-only method is refused like an undeclared call, and for
	// the same reason before the lookup: no pack, plugin or agent can
	// declare it.
	if caller.Name != Operator && operatorOnly(family, method) {
		return nil, wop.Errorf(wop.CodeCapabilityNotDeclared, "%s may not call %s.%s: only the operator manages the prompt store (host prompts)", caller.Name, family, method).WithCapability(capabilityName(family, method))
	}
	inv, fam, ok := r.reg.Lookup(family)
	if !ok {
		return nil, wop.NotProvided("host." + family)
	}
	if facet != "" {
		if _, ok := fam.Facets[facet]; !ok {
			return nil, wop.NotProvided("host." + family + "." + facet)
		}
	}
	if !slices.Contains(fam.Methods, method) {
		return nil, wop.Errorf(wop.CodeNotFound, "family %s has no method %q", family, method).WithCapability(capabilityName(family, method))
	}
	// A deadline the context already meets (the caller's own, carried by
	// gRPC) needs no second timer; see deadlineSlack. A call whose deadline
	// has passed is refused here all the same.
	if !call.Deadline.IsZero() {
		if d, ok := ctx.Deadline(); !ok || call.Deadline.Add(deadlineSlack).Before(d) {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, call.Deadline)
			defer cancel()
		} else if !time.Now().Before(call.Deadline) {
			return nil, contextError(context.DeadlineExceeded, capabilityName(family, method))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, contextError(err, capabilityName(family, method))
	}
	invoke := func(payload []byte) ([]byte, error) {
		if pending != nil {
			if ok, out, err := pending.answer(); ok {
				return out, err
			}
		}
		out, err := inv.Invoke(ctx, family, method, payload, call)
		if err != nil {
			we := wop.AsError(err)
			if ctx.Err() != nil {
				if we.Code == wop.CodeUnavailable || we.Code == wop.CodeInternal {
					return nil, contextError(ctx.Err(), capabilityName(family, method))
				}
			} else if we.Code == wop.CodeCancelled {
				// The caller did not cancel: the host closed its connection to
				// a plugin that exited while the call was in flight.
				return nil, wop.Errorf(wop.CodeUnavailable, "%s: the plugin went away during the call", capabilityName(family, method)).WithCapability(capabilityName(family, method)).WithRetryable(true)
			}
			return nil, err
		}
		if len(out) > r.maxBytes {
			return nil, wop.Errorf(wop.CodeUpstreamUnavailable, "result of %d bytes is over the %d-byte limit", len(out), r.maxBytes).WithCapability(capabilityName(family, method))
		}
		return out, nil
	}
	if p := r.policies[family]; p != nil {
		return p.Call(ctx, caller, call, method, payload, invoke)
	}
	return invoke(payload)
}

// capabilityName is the capability a call of family.method concerns, as
// its refusals and failures name it. It is built only when one needs it:
// a call that succeeds never does.
func capabilityName(family, method string) string {
	return "host." + family + "." + method
}

func contextError(err error, capability string) error {
	if err == context.DeadlineExceeded {
		return wop.Errorf(wop.CodeDeadlineExceeded, "the call's deadline passed").WithCapability(capability)
	}
	return wop.Errorf(wop.CodeCancelled, "the call was cancelled").WithCapability(capability)
}
