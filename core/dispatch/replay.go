package dispatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/wophost/wophost/internal/canonjson"
	"github.com/wophost/wophost/sdk/wop"
)

// Replay refusals (OpenWOP's replay codes).
const (
	// CodeReplaySourceMissing fails a replayed call that has effects and
	// no outcome in the source run's log: nothing is performed and no
	// success is made up.
	CodeReplaySourceMissing = "replay_source_missing"
	// CodeReplayDivergedAtRefusal fails a replayed call that the source
	// run saw succeed and that now refuses, or the reverse.
	CodeReplayDivergedAtRefusal = "replay_diverged_at_refusal"
)

// LogLimits bound one run's invocation log. A zero field means no bound.
type LogLimits struct {
	MaxCalls int
	MaxBytes int
}

// ReplaySource is the recorded run a replay answers from.
type ReplaySource struct {
	// RunID names the source run in divergences and refusals.
	RunID string
	Log   *InvocationLog
	// Live, when set, picks calls to run for real although they have
	// effects: the replay becomes a branch.
	Live func(family, method string) bool
	// Branch marks the replay a branch from its start: the node's own
	// code has effects and runs again.
	Branch bool
}

// Divergence is one difference between a replay and its source run.
type Divergence struct {
	// Seq is the replay's call, 0 for a source call the replay never made.
	Seq    int    `json:"seq"`
	Family string `json:"family"`
	Method string `json:"method"`
	// Key is the replay's invocation key; RecordedKey the source run's
	// key at the same place among the node's own calls (or of the call
	// that was not made again), RecordedSeq its number.
	Key         string `json:"key,omitempty"`
	RecordedKey string `json:"recordedKey,omitempty"`
	RecordedSeq int    `json:"recordedSeq,omitempty"`
	Reason      string `json:"reason"`
}

// ReplaySummary is what a replay did with each call.
type ReplaySummary struct {
	// Source is the run replayed.
	Source string `json:"source"`
	// Branch is set when calls with effects ran for real (ReplaySource.Live).
	Branch bool `json:"branch"`
	// Node is NodeFromRecord when the node itself was answered from the
	// source run's record and none of its code ran (a side-effect node).
	Node string `json:"node,omitempty"`
	// Served calls were answered from the source log, Live ones ran.
	Served   int `json:"served"`
	Live     int `json:"live"`
	Diverged int `json:"diverged"`
	// Divergences lists the first maxDivergences differences, in order.
	Divergences []Divergence `json:"divergences,omitempty"`
}

// NodeFromRecord is ReplaySummary.Node for a node answered from its
// record.
const NodeFromRecord = "record"

// maxDivergences bounds the divergences a summary lists; Diverged counts
// them all.
const maxDivergences = 100

// Journal keeps the invocation log of every tracked run in flight and
// answers a replayed run's calls from its source log (docs/replay.md).
// It is safe for concurrent use.
type Journal struct {
	pure      func(family, method string) bool
	sensitive func([]byte) bool

	mu   sync.RWMutex
	runs map[string]*RunLog
}

// NewJournal returns a journal. pure reports whether a method is declared
// pure (a replay runs it live); sensitive reports whether bytes hold a
// secret of the host's configuration, which never enters a log.
func NewJournal(pure func(family, method string) bool, sensitive func([]byte) bool) *Journal {
	return &Journal{pure: pure, sensitive: sensitive, runs: map[string]*RunLog{}}
}

// Track starts logging the calls of run runID within limits and returns
// the log and a function that stops tracking. src, when not nil, makes
// the run a replay of src.
func (j *Journal) Track(runID string, limits LogLimits, src *ReplaySource) (*RunLog, func()) {
	l := &RunLog{limits: limits, pure: j.pure, sensitive: j.sensitive}
	l.log.Calls = []Invocation{}
	if src != nil {
		l.replay = newReplayState(src)
	}
	j.mu.Lock()
	j.runs[runID] = l
	j.mu.Unlock()
	return l, func() {
		j.mu.Lock()
		delete(j.runs, runID)
		j.mu.Unlock()
	}
}

func (j *Journal) run(runID string) *RunLog {
	if j == nil || runID == "" {
		return nil
	}
	j.mu.RLock()
	defer j.mu.RUnlock()
	return j.runs[runID]
}

// RunLog is the invocation log of one run in flight and, for a replay,
// the state of its matching against the source log.
type RunLog struct {
	limits    LogLimits
	pure      func(family, method string) bool
	sensitive func([]byte) bool

	mu     sync.Mutex
	log    InvocationLog
	bytes  int
	seq    int
	direct int // the node's own calls so far (depth 1)
	replay *replayState
	// cut is when the first call the bounds dropped started (zero while
	// the log is whole).
	cut time.Time
}

type replayState struct {
	src *ReplaySource
	// byKey lists the source calls of each key, in order; next counts the
	// occurrences matched so far.
	byKey    map[string][]int
	next     map[string]int
	used     []bool
	direct   []int // indexes of the source's depth-1 calls
	summary  ReplaySummary
	fatal    *wop.Error
	branched bool
}

func newReplayState(src *ReplaySource) *replayState {
	s := &replayState{src: src, byKey: map[string][]int{}, next: map[string]int{}}
	s.summary.Source = src.RunID
	s.branched = src.Branch
	if src.Log != nil {
		s.used = make([]bool, len(src.Log.Calls))
		for i, c := range src.Log.Calls {
			s.byKey[c.Key] = append(s.byKey[c.Key], i)
			if c.Depth <= 1 {
				s.direct = append(s.direct, i)
			}
		}
	}
	return s
}

// pendingCall is one call of a tracked run between its arrival and its
// answer.
type pendingCall struct {
	l     *RunLog
	inv   Invocation
	start time.Time
	// Replay state of the call: the matched source call (-1 for none),
	// whether it runs live, and whether its answer came from the log.
	match   int
	live    bool
	served  bool
	missing bool
	// position is the source's key at this place among the node's own
	// calls, for divergence reports.
	position    string
	positionSeq int
}

// begin registers a call of a tracked run, or returns nil when the run is
// not tracked.
func (j *Journal) begin(caller Caller, family, method string, payload []byte, call wop.CallContext) *pendingCall {
	l := j.run(call.RunID)
	if l == nil {
		return nil
	}
	return l.begin(caller, family, method, payload, call.Depth)
}

// Answer logs an answer the host gives the run itself, where no plugin
// is called: an import of a WebAssembly pack (the clock, random bytes, a
// variable), as family and method (openwop.now_ms) with the request that
// asked for it. The node's own code asked, at depth 1. On a replay the
// source run's answer is returned and perform is not called; otherwise
// perform gives the answer, which is logged. It returns what the caller
// gets, as the router does for a plugin's call.
func (l *RunLog) Answer(caller, family, method string, request []byte, perform func() ([]byte, error)) ([]byte, error) {
	p := l.begin(Caller{Name: caller}, family, method, request, 1)
	if served, out, err := p.answer(); served {
		return p.finish(out, err)
	}
	return p.finish(perform())
}

// begin registers a call of the run.
func (l *RunLog) begin(caller Caller, family, method string, payload []byte, depth int) *pendingCall {
	p := &pendingCall{l: l, start: time.Now(), match: -1}
	p.inv = Invocation{
		Caller: caller.Name, Depth: depth, Family: family, Method: method,
		Key: InvocationKey(family, method, payload), Pure: l.pure != nil && l.pure(family, method),
		StartedAt: p.start.UTC(),
	}
	if caller.Agent != nil {
		p.inv.Agent = caller.Agent.InstanceID
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	p.inv.Seq = l.seq
	if depth <= 1 {
		l.direct++
	}
	r := l.replay
	if r == nil {
		return p
	}
	p.live = p.inv.Pure || (r.src.Live != nil && r.src.Live(family, method))
	if occ := r.byKey[p.inv.Key]; r.next[p.inv.Key] < len(occ) {
		p.match = occ[r.next[p.inv.Key]]
		r.next[p.inv.Key]++
		r.used[p.match] = true
	}
	if depth <= 1 && l.direct <= len(r.direct) {
		c := r.src.Log.Calls[r.direct[l.direct-1]]
		p.position, p.positionSeq = c.Key, c.Seq
	}
	return p
}

// answer is called where the router would invoke the plugin. For a call a
// replay serves it returns true and the source's outcome; for a call with
// effects the source log cannot answer, true and replay_source_missing;
// otherwise false, and the plugin is called.
func (p *pendingCall) answer() (bool, []byte, error) {
	l := p.l
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.replay
	if r == nil || p.live {
		return false, nil, nil
	}
	var src *Invocation
	if p.match >= 0 {
		src = &r.src.Log.Calls[p.match]
	}
	if src == nil || src.Redacted {
		why := "the source run's log holds no outcome for this call"
		switch {
		case src != nil:
			why = "the source run's outcome of this call held a sensitive value and was not kept"
		case r.src.Log == nil:
			why = "the source run's record has no invocation log"
		case r.src.Log.Truncated:
			why = fmt.Sprintf("the source run's log was cut after %d calls (%d dropped)", len(r.src.Log.Calls), r.src.Log.Dropped)
			if r.src.Log.CutReason != "" {
				why += ": " + r.src.Log.CutReason
			}
		}
		e := wop.Errorf(CodeReplaySourceMissing, "replay of %s: %s.%s has effects and %s; nothing was performed",
			r.src.RunID, p.inv.Family, p.inv.Method, why).
			WithCapability("host." + p.inv.Family + "." + p.inv.Method).
			WithDetails(map[string]string{"sourceRunId": r.src.RunID, "key": p.inv.Key, "seq": strconv.Itoa(p.inv.Seq)})
		r.fail(e)
		p.missing = true
		return true, nil, e
	}
	p.served = true
	if src.Error != nil {
		e := *src.Error
		return true, nil, &e
	}
	return true, compact(src.Result), nil
}

// finish logs the call's outcome and, on a replay, compares it with the
// source's. It returns the outcome the caller gets: the one given, or the
// replay's refusal when the call diverged at a refusal.
func (p *pendingCall) finish(out []byte, err error) ([]byte, error) {
	l := p.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.replay; r != nil {
		out, err = r.compare(p, out, err)
	}
	inv := p.inv
	inv.DurationMicros = time.Since(p.start).Microseconds()
	if err != nil {
		inv.Error = wop.AsError(err)
	} else {
		inv.Result = out
	}
	if l.replay != nil {
		inv.Source = SourceLive
		if p.served {
			inv.Source = SourceLog
		}
	}
	l.add(inv)
	return out, err
}

// compare applies the replay rules to a finished call.
func (r *replayState) compare(p *pendingCall, out []byte, err error) ([]byte, error) {
	if !p.served && p.live {
		r.summary.Live++
		if !p.inv.Pure {
			r.branched = true
		}
	}
	if p.served {
		r.summary.Served++
	}
	if p.missing {
		r.diverge(p, "the source run's log holds no outcome for this call")
		return out, err
	}
	if p.match < 0 {
		r.diverge(p, "the source run made no such call (another call or another request)")
		return out, err
	}
	src := &r.src.Log.Calls[p.match]
	if p.served {
		return out, err
	}
	switch {
	case src.Redacted:
		// Nothing to compare with.
	case src.Error == nil && err != nil:
		e := wop.Errorf(CodeReplayDivergedAtRefusal, "replay of %s: %s.%s succeeded in the source run and now refuses: %v",
			r.src.RunID, p.inv.Family, p.inv.Method, err).
			WithCapability("host." + p.inv.Family + "." + p.inv.Method).
			WithDetails(map[string]string{"sourceRunId": r.src.RunID, "key": p.inv.Key}).WithCause(err)
		r.fail(e)
		r.diverge(p, "succeeded in the source run, refused now ("+wop.CodeOf(err)+")")
		return nil, e
	case src.Error != nil && err == nil:
		e := wop.Errorf(CodeReplayDivergedAtRefusal, "replay of %s: %s.%s was refused in the source run (%s) and now succeeds",
			r.src.RunID, p.inv.Family, p.inv.Method, src.Error.Code).
			WithCapability("host." + p.inv.Family + "." + p.inv.Method).
			WithDetails(map[string]string{"sourceRunId": r.src.RunID, "key": p.inv.Key, "code": src.Error.Code})
		r.fail(e)
		r.diverge(p, "refused in the source run ("+src.Error.Code+"), succeeded now")
		return nil, e
	case src.Error != nil && wop.CodeOf(err) != src.Error.Code:
		r.diverge(p, "refused with "+wop.CodeOf(err)+", the source run with "+src.Error.Code)
	case src.Error == nil && !sameJSON(src.Result, out):
		r.diverge(p, "answered differently than in the source run")
	}
	return out, err
}

// sameJSON reports whether two answers are the same JSON value: a run
// record holds them re-indented, and member order is the plugin's.
func sameJSON(a, b []byte) bool {
	ca, errA := canonjson.Transform(a)
	cb, errB := canonjson.Transform(b)
	if errA != nil || errB != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca, cb)
}

// compact returns a recorded answer as the plugin sent it, without the
// indentation the run record added.
func compact(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return append([]byte(nil), b...)
	}
	return buf.Bytes()
}

func (r *replayState) fail(e *wop.Error) {
	if r.fatal == nil {
		r.fatal = e
	}
}

func (r *replayState) diverge(p *pendingCall, reason string) {
	d := Divergence{Seq: p.inv.Seq, Family: p.inv.Family, Method: p.inv.Method, Key: p.inv.Key, Reason: reason}
	if p.match >= 0 {
		src := r.src.Log.Calls[p.match]
		d.RecordedKey, d.RecordedSeq = src.Key, src.Seq
	} else {
		d.RecordedKey, d.RecordedSeq = p.position, p.positionSeq
	}
	r.add(d)
}

func (r *replayState) add(d Divergence) {
	r.summary.Diverged++
	if len(r.summary.Divergences) < maxDivergences {
		r.summary.Divergences = append(r.summary.Divergences, d)
	}
}

// add appends inv within the log's bounds, leaving out an outcome that
// holds a secret.
func (l *RunLog) add(inv Invocation) {
	if l.sensitive != nil && (l.sensitive(inv.Result) || (inv.Error != nil && (l.sensitive([]byte(inv.Error.Message)) || l.sensitive(inv.Error.Details)))) {
		inv.Result, inv.Error, inv.Redacted = nil, nil, true
	}
	n := inv.size()
	if l.log.Truncated || (l.limits.MaxCalls > 0 && len(l.log.Calls) >= l.limits.MaxCalls) ||
		(l.limits.MaxBytes > 0 && l.bytes+n > l.limits.MaxBytes) {
		// Once cut, the log stays cut: a later, smaller call kept after a
		// dropped one would let a replay answer out of order.
		if !l.log.Truncated || inv.StartedAt.Before(l.cut) {
			l.cut = inv.StartedAt
			l.log.CutReason = "the run's calls passed the log's bounds (log_max_calls, log_max_bytes)"
		}
		l.log.Truncated = true
		l.log.Dropped++
		return
	}
	l.bytes += n
	l.log.Calls = append(l.log.Calls, inv)
}

// Log returns a copy of the log so far.
func (l *RunLog) Log() *InvocationLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.log
	c.Calls = append([]Invocation{}, l.log.Calls...)
	// Calls are added as they finish; the log lists them as they came.
	sort.Slice(c.Calls, func(i, j int) bool { return c.Calls[i].Seq < c.Calls[j].Seq })
	return &c
}

// Fatal returns the error that fails a replayed run whatever its node
// made of it (replay_source_missing, replay_diverged_at_refusal), or nil.
func (l *RunLog) Fatal() *wop.Error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.replay == nil || l.replay.fatal == nil {
		return nil
	}
	return l.replay.fatal
}

// Summary returns what the replay did, nil for a run that is no replay.
// Source calls of the node that the replay never made count as
// divergences.
func (l *RunLog) Summary() *ReplaySummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.replay
	if r == nil {
		return nil
	}
	s := r.summary
	s.Divergences = append([]Divergence(nil), s.Divergences...)
	s.Branch = r.branched
	for _, i := range r.direct {
		if !r.used[i] {
			c := r.src.Log.Calls[i]
			s.Diverged++
			if len(s.Divergences) < maxDivergences {
				s.Divergences = append(s.Divergences, Divergence{Family: c.Family, Method: c.Method, RecordedKey: c.Key, RecordedSeq: c.Seq,
					Reason: "the source run made this call; the replay did not"})
			}
		}
	}
	return &s
}
