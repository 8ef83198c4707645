package dispatch

import (
	"slices"
	"time"
)

// passesNodeCalls is a Policy that lets a pack node's calls through
// unchanged (MCPPolicy acts on agents' calls only).
type passesNodeCalls interface {
	PassesNodeCalls() bool
}

// PassesNodeCalls implements passesNodeCalls: a node's mcp calls pass
// unchanged, so they may take a direct channel.
func (MCPPolicy) PassesNodeCalls() bool { return true }

// ReportedCallObserver is an Observer that also counts the calls the
// router did not route: those a run made on a direct channel, which the
// plugin reports when the run ends, with the time each took.
type ReportedCallObserver interface {
	CallReported(family, method string, took time.Duration, err error)
}

// NeedsHost reports whether a node's calls to family must go through the
// host: the family has a host-side policy that acts on them (prompt
// pinning, agent callers). A family that does not may be called on a
// direct channel, whose plugin applies the router's own checks.
func (r *Router) NeedsHost(family string) bool {
	p := r.policies[family]
	if p == nil {
		return false
	}
	pass, ok := p.(passesNodeCalls)
	return !ok || !pass.PassesNodeCalls()
}

// AddDirect adds to the log the calls the run made on a direct channel,
// which the router never saw, reported by the plugin when the run ended.
// Each call carries its Caller, Depth, Family, Method, Key, outcome and
// times; AddDirect marks the pure ones. The log is then ordered by start
// time and numbered again, and held to its bounds in that order: dropped
// calls on the channel (from cut on) and the log's own cut both end it
// where the first call was lost, so that a replay never answers past a
// gap. reason says why the channel's calls from cut on were lost.
func (l *RunLog) AddDirect(calls []Invocation, dropped int, cut time.Time, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range calls {
		calls[i].Pure = l.pure != nil && l.pure(calls[i].Family, calls[i].Method)
	}
	all := append(slices.Clone(l.log.Calls), calls...)
	slices.SortStableFunc(all, func(a, b Invocation) int { return a.StartedAt.Compare(b.StartedAt) })
	end, why := time.Time{}, l.log.CutReason
	if l.log.Truncated {
		end = l.cut
	}
	if dropped > 0 && (end.IsZero() || cut.Before(end)) {
		end, why = cut, reason
	}
	lost := l.log.Dropped + dropped
	l.log = InvocationLog{Calls: []Invocation{}}
	l.bytes, l.cut = 0, time.Time{}
	seq := 0
	for _, inv := range all {
		if !end.IsZero() && !inv.StartedAt.Before(end) {
			// Calls from the first lost one on are dropped, those the
			// log held included.
			lost++
			continue
		}
		seq++
		inv.Seq = seq
		l.add(inv)
	}
	l.seq = seq
	if lost > 0 {
		l.log.Dropped += lost
		if !l.log.Truncated || end.Before(l.cut) {
			l.cut = end
		}
		l.log.Truncated = true
		l.log.CutReason = why
	}
}
