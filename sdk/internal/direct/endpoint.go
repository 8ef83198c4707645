package direct

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// maxSocketPath is the longest unix socket path the endpoint uses, the
// least of the platforms' bounds (sun_path less its terminating NUL).
const maxSocketPath = 103

// Handler runs one call that passed the grant's checks, with the call
// context the host would have sent. It returns the result or a *wop.Error.
type Handler func(ctx context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error)

// Endpoint is a plugin's side of its direct channel: the grant key of the
// current configuration, the calls of the runs in flight and the runs the
// host ended. It is safe for concurrent use.
type Endpoint struct {
	handle Handler
	// execute runs the node runs of a pack's channel; nil on a plugin's.
	execute  ExecuteHandler
	maxBytes int
	// writeTimeout bounds each answer's write (see conn.writeTimeout).
	writeTimeout time.Duration

	// admitted caches the grants verified under the current key, by their
	// signed bytes (string to *admitted), so that a run's later calls skip
	// the HMAC, the decoding and mu. A new key replaces the map.
	admitted atomic.Pointer[sync.Map]
	// settings are the rules and slots of the current configuration.
	settings atomic.Pointer[channelSettings]

	// umu guards unreadByPack, the answer bytes of each pack's calls
	// written to none of its connections yet (unread.go).
	umu          sync.Mutex
	unreadByPack map[string]int64

	mu  sync.Mutex
	key []byte
	// runs holds the calls of each run with a grant in use; ended the
	// runs the host ended, until their grants' deadlines pass.
	runs  map[string]*runCalls
	ended *endedRuns

	listener net.Listener
	// conns are the connections being served, closed with the endpoint.
	conns    map[*tls.Conn]struct{}
	endpoint *wophostv1.DirectChannelEndpoint
}

// channelSettings are what the host set for the calls on the channel:
// the rules of each family the plugin serves, and the slots that bound
// the calls in flight (max_concurrent_calls).
type channelSettings struct {
	rules map[string]admission.Rules
	slots *admission.Slots
	// maxUnread bounds the answer bytes held for callers that do not
	// read them, per connection and per pack (unread.go).
	maxUnread int64
}

// admitted is one verified grant, with what the admission of its calls
// needs of it.
type admitted struct {
	grant    *wophostv1.Grant
	calls    *runCalls
	caller   string
	declared admission.Declared
	limits   admission.Limits
	deadline time.Time
}

// newAdmitted returns g's admission, its declarations read once.
func newAdmitted(g *wophostv1.Grant, calls *runCalls) *admitted {
	return &admitted{
		grant: g, calls: calls,
		caller:   admission.NodeCaller(g.GetPack(), g.GetTypeId()),
		declared: func(family, facet string) bool { return Allows(g, family, facet) },
		limits:   admission.Limits{DepthLimit: int(g.GetDepthLimit()), MaxBytes: g.GetMaxBytes()},
		deadline: time.Unix(0, g.GetDeadlineUnixNano()),
	}
}

// RulesFromProto converts the rules the host sends in
// DirectChannelSettings.
func RulesFromProto(in []*wophostv1.FamilyRules) map[string]admission.Rules {
	out := make(map[string]admission.Rules, len(in))
	for _, fr := range in {
		out[fr.GetFamily()] = admission.Rules{Facets: wire.FacetRulesFromProto(fr.GetFacetRules()), OperatorOnly: fr.GetOperatorOnly()}
	}
	return out
}

// RulesToProto converts rules for DirectChannelSettings, in the order of
// the family names.
func RulesToProto(rules map[string]admission.Rules) []*wophostv1.FamilyRules {
	out := make([]*wophostv1.FamilyRules, 0, len(rules))
	for _, fam := range slices.Sorted(maps.Keys(rules)) {
		r := rules[fam]
		out = append(out, &wophostv1.FamilyRules{Family: fam, FacetRules: wire.FacetRulesToProto(r.Facets), OperatorOnly: r.OperatorOnly})
	}
	return out
}

// NewEndpoint returns an endpoint whose calls run on handle, with results
// bounded by maxBytes as every other message of the process.
func NewEndpoint(handle Handler, maxBytes int) *Endpoint {
	e := &Endpoint{handle: handle, maxBytes: maxBytes, writeTimeout: writeTimeout, runs: map[string]*runCalls{}, ended: newEndedRuns(),
		unreadByPack: map[string]int64{}}
	e.admitted.Store(&sync.Map{})
	e.settings.Store(&channelSettings{slots: admission.NewSlots(0, ""), maxUnread: defaultMaxUnread(maxBytes)})
	return e
}

// Open sets the grant key and, on the first call, starts serving the
// channel on a unix socket in s.SocketDir. A new key refuses every grant
// made with the old one. It returns where the channel is served.
func (e *Endpoint) Open(s *wophostv1.DirectChannelSettings) (*wophostv1.DirectChannelEndpoint, error) {
	if len(s.GetGrantKey()) != KeyBytes {
		return nil, fmt.Errorf("direct channel: grant key of %d bytes, want %d", len(s.GetGrantKey()), KeyBytes)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.key = append([]byte(nil), s.GetGrantKey()...)
	e.admitted.Store(&sync.Map{})
	set := &channelSettings{rules: RulesFromProto(s.GetRules()), slots: admission.NewSlots(int(s.GetMaxConcurrentCalls()), s.GetCapability()),
		maxUnread: s.GetMaxUnreadBytes()}
	if set.maxUnread <= 0 {
		set.maxUnread = defaultMaxUnread(e.maxBytes)
	}
	if old := e.settings.Load(); old.slots.Len() == set.slots.Len() {
		// The calls in flight keep their slots.
		set.slots = old.slots
	}
	e.settings.Store(set)
	if e.listener != nil {
		return e.endpoint, nil
	}
	cert, err := wire.SelfSignedCertificate()
	if err != nil {
		return nil, fmt.Errorf("direct channel certificate: %w", err)
	}
	// The directory is the host's for this process alone, so a short
	// name is unique: a unix socket's whole path is bounded (108 bytes on
	// Linux, 104 on the BSDs).
	path := filepath.Join(s.GetSocketDir(), "direct.sock")
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("direct channel: socket path %q is %d bytes, over the %d a unix socket allows", path, len(path), maxSocketPath)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("direct channel: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13, NextProtos: protocols()}
	e.listener, e.conns = l, map[*tls.Conn]struct{}{}
	e.endpoint = &wophostv1.DirectChannelEndpoint{Address: path, Certificate: cert.Certificate[0]}
	go e.accept(l, cfg)
	return e.endpoint, nil
}

// Close stops serving the channel, ends the calls in flight on it and
// removes its socket.
func (e *Endpoint) Close() {
	e.mu.Lock()
	l, conns := e.listener, e.conns
	e.listener, e.conns = nil, nil
	e.mu.Unlock()
	if l == nil {
		return
	}
	_ = l.Close()
	for c := range conns {
		// The sockets: a TLS close would wait to send each caller a
		// close_notify.
		_ = c.NetConn().Close()
	}
	_ = os.Remove(l.Addr().String())
}

// refusal is the answer to a grant the endpoint does not accept, told
// apart from every call outcome: the call did not run and may go through
// the host.
type refusal struct{ why string }

func (r *refusal) Error() string { return "direct channel: " + r.why }

func errRefused(why string) error { return &refusal{why: why} }

// admit returns the grant signed holds and the run's call log, or a
// refusal: a grant not made with the current key, or of an ended run.
func (e *Endpoint) admit(signed []byte, now time.Time) (*admitted, error) {
	if a, ok := e.admitted.Load().Load(string(signed)); ok {
		return a.(*admitted), nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.key == nil {
		return nil, errRefused("the channel is closed")
	}
	g, err := Verify(e.key, signed)
	if err != nil {
		return nil, errRefused(err.Error())
	}
	if e.ended.has(g.GetRunId()) {
		return nil, errRefused("run " + g.GetRunId() + " has ended")
	}
	if g.GetDeadlineUnixNano() == 0 {
		// Without a deadline an ended run could not be forgotten.
		return nil, errRefused("the grant has no deadline")
	}
	rc := e.runs[g.GetRunId()]
	if rc == nil {
		rc = &runCalls{limits: g}
		e.runs[g.GetRunId()] = rc
	}
	a := newAdmitted(g, rc)
	e.admitted.Load().Store(string(signed), a)
	return a, nil
}

// EndRun refuses the run's grants from now on, until deadline, when
// they expire by themselves, and returns the calls it made on the
// channel.
func (e *Endpoint) EndRun(runID string, deadline time.Time) *wophostv1.EndRunResponse {
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	rc := e.runs[runID]
	delete(e.runs, runID)
	expiry := deadline
	cache := e.admitted.Load()
	cache.Range(func(k, v any) bool {
		if a := v.(*admitted); a.grant.GetRunId() == runID {
			if d := time.Unix(0, a.grant.GetDeadlineUnixNano()); d.After(expiry) {
				expiry = d
			}
			cache.Delete(k)
		}
		return true
	})
	// A run ended is remembered until its grants expire by themselves;
	// the ones expired are forgotten now.
	e.ended.forget(now)
	if expiry.After(now) {
		e.ended.add(runID, expiry)
	}
	if rc == nil {
		return &wophostv1.EndRunResponse{}
	}
	return rc.take()
}

// invoke runs one call that arrived on the channel and returns its
// answer: a refusal of the grant, or the call's outcome, which is logged
// for the run, with the pack its grant names.
func (e *Endpoint) invoke(ctx context.Context, req *wophostv1.DirectChannelInvokeRequest) ([]byte, string, error) {
	start := time.Now()
	a, err := e.admit(req.GetGrant(), start)
	if err != nil {
		return nil, "", err
	}
	family, method, payload := req.GetFamily(), req.GetMethod(), req.GetPayload()
	set := e.settings.Load()
	// The call's own deadline may only shorten the grant's, never extend
	// it: the grant is the host's word, the request the pack's.
	deadline := a.deadline
	if d := req.GetDeadlineUnixNano(); d != 0 && time.Unix(0, d).Before(deadline) {
		deadline = time.Unix(0, d)
	}
	call := admission.Call{Caller: a.caller, Family: family, Method: method, Payload: payload, Depth: int(a.grant.GetDepth()), Deadline: deadline}
	var out []byte
	if _, we := admission.Admit(call, a.limits, a.declared, set.rules[family], start); we != nil {
		err = we
	} else if release, we := e.slot(ctx, set.slots, deadline, family, method); we != nil {
		err = we
	} else {
		cc := CallContext(a.grant, req.GetTraceparent())
		cc.Deadline = deadline
		out, err = e.handle(ctx, family, method, payload, cc)
		release()
		if err == nil {
			if we := admission.CheckResult(family, method, out, a.limits); we != nil {
				out, err = nil, we
			}
		}
	}
	a.calls.add(family, method, payload, out, err, start)
	return out, a.grant.GetPack(), err
}

// slot waits for one of the channel's call slots until the call's
// deadline, as the host waits for one of a capability's.
func (e *Endpoint) slot(ctx context.Context, slots *admission.Slots, deadline time.Time, family, method string) (func(), *wop.Error) {
	if slots.Len() == 0 {
		return func() {}, nil
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return slots.Acquire(ctx, family, method)
}

// runCalls is the log of one run's calls on the channel, bounded by its
// grant's log limits. Like the host's log, once cut it stays cut.
type runCalls struct {
	limits *wophostv1.Grant

	mu      sync.Mutex
	calls   []*wophostv1.DirectCall
	bytes   int64
	dropped int64
	cut     int64
}

// unloggedMaxCalls bounds the calls kept of a run whose grant asks for
// no log: only their method, outcome code and time, for the host's
// metrics.
const unloggedMaxCalls = 10000

func (r *runCalls) add(family, method string, payload, out []byte, err error, start time.Time) {
	c := &wophostv1.DirectCall{
		Family: family, Method: method,
		StartedUnixNano: start.UnixNano(), DurationMicros: time.Since(start).Microseconds(),
	}
	log := r.limits.GetLog()
	if err != nil {
		we := wire.FromStatus(wire.ToStatus(err))
		if !log {
			// The code is all the metrics need.
			we = &wop.Error{Code: we.Code}
		}
		c.Error, _ = json.Marshal(we)
	} else if log {
		c.Result = out
	}
	if log {
		c.Payload = payload
	}
	maxCalls := r.limits.GetLogMaxCalls()
	if !log {
		maxCalls = unloggedMaxCalls
	}
	n := int64(len(c.Payload) + len(c.Result) + len(c.Error) + len(family) + len(method))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dropped > 0 || (maxCalls > 0 && int64(len(r.calls)) >= maxCalls) ||
		(log && r.limits.GetLogMaxBytes() > 0 && r.bytes+n > r.limits.GetLogMaxBytes()) {
		if r.dropped == 0 || c.StartedUnixNano < r.cut {
			r.cut = c.StartedUnixNano
		}
		r.dropped++
		return
	}
	r.bytes += n
	r.calls = append(r.calls, c)
}

func (r *runCalls) take() *wophostv1.EndRunResponse {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &wophostv1.EndRunResponse{Calls: r.calls, Dropped: r.dropped, CutUnixNano: r.cut}
}
