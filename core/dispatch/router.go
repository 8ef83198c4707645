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
	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/hostwire"
	"github.com/wophost/wophost/sdk/tracing"
	"github.com/wophost/wophost/sdk/wop"
)

// Operator is the Caller name of the operator's own calls (host call,
// host prompts). Only the host gives it.
const Operator = admission.Operator

// Caller is who makes a host-service call.
type Caller struct {
	// Name is admission.NodeCaller, admission.PluginCaller (with the
	// agent a plugin acts for) or Operator.
	Name string
	// Allowed reports whether the caller may call family (and facet);
	// nil for the operator, who may call anything.
	Allowed admission.Declared
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
	reg    *registry.Registry
	limits admission.Limits
	// rules are the core families' rules, fixed by the contract; a
	// vendor family's come with its record in the registry.
	rules map[string]admission.Rules
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
	return &Router{reg: reg, limits: admission.Limits{DepthLimit: depthLimit, MaxBytes: int64(maxBytes)}, rules: hostwire.CoreRules(),
		policies: map[string]Policy{}, tracer: noop.NewTracerProvider().Tracer("")}
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
	inv, fam, served := r.reg.Lookup(family)
	rules, core := r.rules[family]
	if !core && served {
		rules = fam.Rules
	}
	c := admission.Call{Caller: caller.Name, Family: family, Method: method, Payload: payload, Depth: call.Depth, Deadline: call.Deadline}
	facet, refusal := admission.Admit(c, r.limits, caller.Allowed, rules, time.Now())
	if refusal != nil {
		return nil, refusal
	}
	if !served {
		return nil, r.reg.NotServed(family, "host."+family)
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
	// gRPC) needs no second timer; see deadlineSlack. Admit refused a
	// call whose deadline had passed.
	if !call.Deadline.IsZero() {
		if d, ok := ctx.Deadline(); !ok || call.Deadline.Add(deadlineSlack).Before(d) {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, call.Deadline)
			defer cancel()
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
		if we := admission.CheckResult(family, method, out, r.limits); we != nil {
			return nil, we
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
func capabilityName(family, method string) string { return admission.Capability(family, method) }

func contextError(err error, capability string) error {
	if err == context.DeadlineExceeded {
		return wop.Errorf(wop.CodeDeadlineExceeded, "the call's deadline passed").WithCapability(capability)
	}
	return wop.Errorf(wop.CodeCancelled, "the call was cancelled").WithCapability(capability)
}
