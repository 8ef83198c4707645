package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/sdk/wop"
)

// Protocol revisions the client speaks, newest first.
const (
	RevisionModern = "2026-07-28"
	RevisionLegacy = "2025-11-25"
)

// Revisions lists every revision the client speaks, newest first.
var Revisions = []string{RevisionModern, RevisionLegacy}

// The 2026-07-28 error codes that identify a modern server.
const (
	CodeHeaderMismatch             = -32020
	CodeMissingRequiredCapability  = -32021
	CodeUnsupportedProtocolVersion = -32022
)

// _meta keys of every modern request, and the trace context's key (one
// of the spec's unprefixed exceptions), sent when the call has one.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaTraceparent        = "traceparent"
)

// Health statuses.
const (
	StatusReachable    = "reachable"
	StatusUnreachable  = "unreachable"
	StatusIncompatible = "incompatible"
)

// InputAnswerer answers the input requests a server makes: inside an
// InputRequiredResult (2026-07-28) or as server-to-client requests of a
// legacy session.
type InputAnswerer interface {
	// Capabilities is the ClientCapabilities object declared to the server
	// in a request made with ctx: in the _meta of every 2026-07-28 request,
	// and in the initialize that begins a 2025-11-25 session.
	Capabilities(ctx context.Context) json.RawMessage
	// Answer returns the result for one input request (elicitation/create,
	// sampling/createMessage, roots/list). An error means the request is
	// declined: its key is left out of inputResponses, or a legacy request
	// gets a JSON-RPC error.
	Answer(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

// Options configures a Client for one server.
type Options struct {
	// Exactly one of Stdio and HTTP is set.
	Stdio *StdioOptions
	HTTP  *HTTPOptions
	// CallTimeout bounds each request to the server. Zero means 60s.
	CallTimeout time.Duration
	// DiscoverTimeout bounds the server/discover probe, after which a
	// silent stdio server is taken for a legacy one. Zero means 5s.
	DiscoverTimeout time.Duration
	// ReprobeAfter is how long a stdio server taken for a legacy one
	// because its probe went unanswered (silence, an exit, a garbled
	// reply) is used as one before it is probed again; the wait doubles
	// while the probes stay unanswered, up to maxReprobeWait. A new server
	// process is probed at once. Zero means 30s.
	ReprobeAfter time.Duration
	// MinimumRevision is the oldest revision accepted; empty accepts
	// every revision in Revisions.
	MinimumRevision string
	// MaxRounds bounds the input rounds of one call: the retries of an
	// input-required exchange, or the requests a legacy server makes of
	// the client during the call. Zero means 8.
	MaxRounds int
	// MaxMessageBytes bounds any one message read from the server. Zero
	// means 16 MiB.
	MaxMessageBytes int
	// ClientInfo is the Implementation object sent as clientInfo.
	ClientInfo json.RawMessage
	// Inputs answers input requests; nil declines them all.
	Inputs InputAnswerer
	Logger hclog.Logger
}

type era int

const (
	eraUnknown era = iota
	eraModern
	eraLegacy
)

// Defaults of Options, and the longest wait between probes of a server
// taken for a legacy one on an unanswered probe.
const (
	defaultReprobeAfter = 30 * time.Second
	maxReprobeWait      = 10 * time.Minute
)

// Client talks to one MCP server. It is safe for concurrent use.
type Client struct {
	opts   Options
	t      transport
	stdio  *stdioTransport
	nextID atomic.Int64

	// detectMu serialises era detection and legacy handshakes.
	detectMu sync.Mutex

	mu        sync.Mutex
	era       era
	version   string
	legacyKey string
	// provisional marks a legacy era concluded from a probe that got no
	// answer: the server may only have been slow or broken that once. It
	// holds for the process it was concluded on, until reprobeAt.
	provisional bool
	reprobeAt   time.Time
	// reprobeWait is the next wait before a probe; it doubles while probes
	// go unanswered and starts again from ReprobeAfter once one is.
	reprobeWait time.Duration

	toolsMu sync.Mutex
	tools   map[string]toolHeaders

	healthMu  sync.Mutex
	health    *Health
	healthAt  time.Time
	healthTTL time.Duration

	// now is the clock behind re-probe waits and health caching; New sets
	// it to time.Now, and tests replace it to move past a wait without
	// sleeping through it.
	now func() time.Time
}

// toolHeaders is what the client knows of one tool's x-mcp-header
// annotations. Invalid tools get no Mcp-Param-* headers at all.
type toolHeaders struct {
	headers []ParamHeader
	invalid bool
}

// New returns a client; nothing is started until the first request.
func New(opts Options) (*Client, error) {
	if (opts.Stdio == nil) == (opts.HTTP == nil) {
		return nil, errors.New("exactly one of Stdio and HTTP must be set")
	}
	if opts.Stdio != nil && len(opts.Stdio.Command) == 0 {
		return nil, errors.New("stdio command is empty")
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 60 * time.Second
	}
	if opts.DiscoverTimeout <= 0 {
		opts.DiscoverTimeout = 5 * time.Second
	}
	if opts.ReprobeAfter <= 0 {
		opts.ReprobeAfter = defaultReprobeAfter
	}
	if opts.MaxRounds <= 0 {
		opts.MaxRounds = 8
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = 16 << 20
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if len(opts.ClientInfo) == 0 {
		opts.ClientInfo = json.RawMessage(`{"name":"wophost","version":"0.1.0"}`)
	}
	c := &Client{opts: opts, tools: map[string]toolHeaders{}, reprobeWait: opts.ReprobeAfter, now: time.Now}
	if opts.Stdio != nil {
		c.stdio = newStdioTransport(*opts.Stdio, opts.MaxMessageBytes, opts.MaxRounds, opts.Logger, c.answerServerRequest, &c.nextID)
		c.t = c.stdio
	} else {
		c.t = newHTTPTransport(*opts.HTTP, opts.MaxMessageBytes, opts.MaxRounds, opts.Logger, c.answerServerRequest, &c.nextID)
	}
	return c, nil
}

// Close stops the server process (stdio) or ends a legacy session (HTTP).
func (c *Client) Close() { c.t.close() }

func (c *Client) capabilities(ctx context.Context) json.RawMessage {
	if c.opts.Inputs == nil {
		return json.RawMessage(`{}`)
	}
	return c.opts.Inputs.Capabilities(ctx)
}

// accepted reports whether v is a revision the client speaks at or above
// the configured minimum.
func (c *Client) accepted(v string) bool {
	return slices.Contains(Revisions, v) && v >= c.opts.MinimumRevision
}

// pick chooses from a server's list: the modern revision if shared, else
// whether the legacy one is.
func (c *Client) pick(supported []string) (modern string, legacy bool) {
	if slices.Contains(supported, RevisionModern) && c.accepted(RevisionModern) {
		return RevisionModern, false
	}
	return "", slices.Contains(supported, RevisionLegacy) && c.accepted(RevisionLegacy)
}

func (c *Client) state() (era, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.version
	if v == "" {
		v = RevisionModern
	}
	return c.era, v
}

func (c *Client) setModern(v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.era, c.version, c.provisional, c.reprobeWait = eraModern, v, false, c.opts.ReprobeAfter
}

// forgetEra drops what is known of the server's era, so that the next
// request probes it again.
func (c *Client) forgetEra() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.era, c.version, c.legacyKey, c.provisional = eraUnknown, "", "", false
}

// modernParams builds the params object of a modern request made with
// ctx: the caller's fields plus the _meta triple, and the W3C traceparent
// when the call has one, so the server's side joins the node run's trace.
func (c *Client) modernParams(ctx context.Context, version, traceparent string, fields map[string]json.RawMessage) (json.RawMessage, error) {
	m := map[string]json.RawMessage{
		metaProtocolVersion:    mustJSON(version),
		metaClientCapabilities: c.capabilities(ctx),
		metaClientInfo:         c.opts.ClientInfo,
	}
	if traceparent != "" {
		m[metaTraceparent] = mustJSON(traceparent)
	}
	meta, err := marshalJSON(m)
	if err != nil {
		return nil, err
	}
	p := make(map[string]json.RawMessage, len(fields)+1)
	for k, v := range fields {
		p[k] = v
	}
	p["_meta"] = meta
	return marshalJSON(p)
}

// marshalJSON encodes v without HTML escaping, so raw values the server
// sent (a requestState) go back byte for byte.
func marshalJSON(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// traceparentOf returns the W3C traceparent of the call ctx belongs to.
func traceparentOf(ctx context.Context) string {
	cc, _ := wop.CallContextFrom(ctx)
	return cc.Traceparent
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with strings and plain maps
	}
	return b
}

// call describes one logical request: what the HTTP transport needs beyond
// the params.
type call struct {
	method  string
	fields  map[string]json.RawMessage
	name    string
	hasName bool
	headers []header
}

// legacySignal says the server looks like a 2025-11-25 one. unanswered
// says the probe got no answer at all (silence, an exit, a garbled reply
// on stdio), which a legacy server may give, and so may a modern one that
// was slow or broken that once.
type legacySignal struct {
	cause      error
	unanswered bool
}

func (e *legacySignal) Error() string { return "server does not speak 2026-07-28: " + e.cause.Error() }

// send makes one request at the negotiated revision and returns the raw
// result. It runs era detection first and follows -32022 negotiation.
func (c *Client) send(ctx context.Context, cl *call) (json.RawMessage, error) {
	if err := c.ensureEra(ctx); err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 3; attempt++ {
		e, version := c.state()
		if e == eraLegacy {
			return c.sendLegacy(ctx, cl)
		}
		params, err := c.modernParams(ctx, version, traceparentOf(ctx), cl.fields)
		if err != nil {
			return nil, transportErr(cl.method, err)
		}
		rctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		resp, err := c.t.roundTrip(rctx, &request{Method: cl.method, Params: params, Version: version,
			Name: cl.name, HasName: cl.hasName, ParamHeaders: cl.headers})
		cancel()
		if err != nil {
			var se *statusError
			if e == eraUnknown && errors.As(err, &se) && (se.Status == 400 || se.Status == 404 || se.Status == 405) {
				if lerr := c.becomeLegacy(ctx); lerr != nil {
					return nil, err
				}
				continue
			}
			return nil, err
		}
		if resp.Error == nil {
			if e == eraUnknown {
				c.setModern(version)
			}
			return resp.Result, nil
		}
		rpc, perr := parseRPCError(resp.Error)
		if perr != nil {
			return nil, transportErr(cl.method, perr)
		}
		if rpc.Code == CodeUnsupportedProtocolVersion {
			modern, legacy := c.pick(supportedFrom(rpc.Raw))
			switch {
			case modern != "":
				// Retry even when the server lists the revision already
				// sent: the attempt bound ends a server that keeps
				// refusing it.
				c.setModern(modern)
				continue
			case legacy:
				if lerr := c.becomeLegacy(ctx); lerr != nil {
					return nil, rpc
				}
				continue
			}
			return nil, rpc
		}
		if e == eraUnknown && resp.Status == 400 && rpc.Code != CodeHeaderMismatch && rpc.Code != CodeMissingRequiredCapability {
			if lerr := c.becomeLegacy(ctx); lerr != nil {
				return nil, rpc
			}
			continue
		}
		return nil, rpc
	}
	return nil, &TransportError{Op: cl.method, Err: errors.New("protocol revision negotiation did not settle")}
}

// supportedFrom reads data.supported of an UnsupportedProtocolVersion
// error.
func supportedFrom(raw json.RawMessage) []string {
	var e struct {
		Data struct {
			Supported []string `json:"supported"`
		} `json:"data"`
	}
	_ = json.Unmarshal(raw, &e)
	return e.Data.Supported
}

// ensureEra settles the era of a stdio server before a request: with the
// server/discover probe when it is unknown, and again when a legacy era
// concluded from an unanswered probe is due for another look. HTTP learns
// the era from the answer to the first real request.
func (c *Client) ensureEra(ctx context.Context) error {
	if c.stdio == nil || !c.probeDue() {
		return nil
	}
	c.detectMu.Lock()
	defer c.detectMu.Unlock()
	c.settleProvisionalLocked(ctx)
	if e, _ := c.state(); e != eraUnknown {
		return nil
	}
	_, _, err := c.detectLocked(ctx)
	return err
}

// probeDue reports whether the era must be probed before the next request:
// it is unknown, or it is a provisional legacy one whose process is gone
// or whose wait has passed.
func (c *Client) probeDue() bool {
	c.mu.Lock()
	e, provisional, at, key := c.era, c.provisional, c.reprobeAt, c.legacyKey
	c.mu.Unlock()
	if e == eraUnknown {
		return true
	}
	return e == eraLegacy && provisional && (c.stdio.runningKey() != key || !c.now().Before(at))
}

// settleProvisionalLocked looks again at a legacy era concluded from an
// unanswered probe. A new process (the one it was concluded on is gone)
// is a server of which nothing is known yet: the era is forgotten and the
// caller probes it. Once the wait has passed, the running process is
// probed within its session: a DiscoverResult makes the server a modern
// one, any other answer a legacy one for good, and silence keeps it
// provisional with the wait doubled. A probe that fails never fails the
// request, whose legacy session is still there. c.detectMu must be held.
func (c *Client) settleProvisionalLocked(ctx context.Context) {
	c.mu.Lock()
	e, provisional, at, key := c.era, c.provisional, c.reprobeAt, c.legacyKey
	c.mu.Unlock()
	if e != eraLegacy || !provisional {
		return
	}
	if c.stdio.runningKey() != key {
		c.forgetEra()
		return
	}
	if c.now().Before(at) {
		return
	}
	_, version, err := c.discover(ctx)
	var ls *legacySignal
	switch {
	case err == nil:
		c.opts.Logger.Info("server answered server/discover; it is used at 2026-07-28 from now on", "revision", version)
		c.setModern(version)
		return
	case ctx.Err() != nil:
		// The call ended, not the probe: look again next time.
	case errors.As(err, &ls) && !ls.unanswered:
		c.mu.Lock()
		c.provisional = false
		c.mu.Unlock()
	default:
		c.mu.Lock()
		c.reprobeWait = min(2*c.reprobeWait, max(maxReprobeWait, c.opts.ReprobeAfter))
		c.reprobeAt = c.now().Add(c.reprobeWait)
		wait := c.reprobeWait
		c.mu.Unlock()
		c.opts.Logger.Debug("server/discover went unanswered again; still using 2025-11-25", "next_probe_in", wait, "error", err)
	}
	if c.stdio.runningKey() != key {
		// The probe ended the process: the next one is probed afresh.
		c.forgetEra()
	}
}

// detectLocked probes with server/discover and settles the era: modern
// when a DiscoverResult or a modern error comes back, legacy (with the
// initialize handshake done) otherwise. It returns the DiscoverResult when
// there is one. A process that cannot be started settles nothing.
// c.detectMu must be held.
func (c *Client) detectLocked(ctx context.Context) (json.RawMessage, string, error) {
	raw, version, err := c.discover(ctx)
	var ls *legacySignal
	if errors.As(err, &ls) {
		lerr := c.becomeLegacyLocked(ctx, ls.unanswered)
		if lerr == nil {
			_, v := c.state()
			return raw, v, nil
		}
		if !ls.unanswered {
			return raw, "", lerr
		}
		// The legacy era rested on a probe that got no answer, and the
		// handshake failed as well: nothing is known of the server yet.
		c.forgetEra()
		if !errors.Is(lerr, errInitializeRefused) {
			return raw, "", lerr
		}
		// The fresh process refused initialize, so it answers and is no
		// legacy server: the first probe met a server that was slow or
		// broken once. Probe the process that answered.
		raw, version, err = c.discover(ctx)
		if err != nil {
			return raw, "", lerr
		}
		c.opts.Logger.Info("server answered server/discover on a fresh process", "revision", version)
	} else if err != nil {
		return raw, "", err
	}
	c.setModern(version)
	return raw, version, nil
}

// discover sends server/discover with the probe timeout and classifies the
// answer.
func (c *Client) discover(ctx context.Context) (json.RawMessage, string, error) {
	_, version := c.state()
	if !c.accepted(version) {
		version = RevisionModern
	}
	for attempt := 0; attempt < 2; attempt++ {
		params, err := c.modernParams(ctx, version, "", nil)
		if err != nil {
			return nil, "", transportErr("server/discover", err)
		}
		pctx, cancel := context.WithTimeout(ctx, c.opts.DiscoverTimeout)
		resp, err := c.t.roundTrip(pctx, &request{Method: "server/discover", Params: params, Version: version})
		cancel()
		if err != nil {
			var se *startError
			if ctx.Err() != nil || errors.As(err, &se) {
				return nil, "", err
			}
			if c.stdio != nil {
				// No answer in time, an exit or an unreadable reply: a
				// legacy server, or one that failed this once.
				return nil, "", &legacySignal{cause: err, unanswered: true}
			}
			var st *statusError
			if errors.As(err, &st) && (st.Status == 400 || st.Status == 404 || st.Status == 405) {
				// A plain 4xx: a legacy server.
				return nil, "", &legacySignal{cause: err}
			}
			return nil, "", err
		}
		if resp.Error != nil {
			rpc, perr := parseRPCError(resp.Error)
			if perr != nil {
				return nil, "", &legacySignal{cause: perr}
			}
			switch rpc.Code {
			case CodeUnsupportedProtocolVersion:
				modern, legacy := c.pick(supportedFrom(rpc.Raw))
				if modern != "" {
					version = modern
					continue
				}
				if legacy {
					return nil, "", &legacySignal{cause: rpc}
				}
				return nil, "", &TransportError{Op: "server/discover", Err: fmt.Errorf("%w: server supports %v", ErrIncompatible, supportedFrom(rpc.Raw))}
			case CodeHeaderMismatch, CodeMissingRequiredCapability:
				return nil, "", rpc
			}
			return nil, "", &legacySignal{cause: rpc}
		}
		if _, _, err := inspect(resp.Result); err != nil {
			return nil, "", transportErr("server/discover", err)
		}
		var d struct {
			SupportedVersions []string `json:"supportedVersions"`
		}
		if err := json.Unmarshal(resp.Result, &d); err != nil {
			return nil, "", transportErr("server/discover", fmt.Errorf("malformed DiscoverResult: %w", err))
		}
		modern, legacy := c.pick(d.SupportedVersions)
		if modern != "" {
			return resp.Result, modern, nil
		}
		if legacy {
			return resp.Result, "", &legacySignal{cause: errors.New("server offers only legacy revisions")}
		}
		return resp.Result, "", &TransportError{Op: "server/discover", Err: fmt.Errorf("%w: server supports %v", ErrIncompatible, d.SupportedVersions)}
	}
	return nil, "", &TransportError{Op: "server/discover", Err: errors.New("protocol revision negotiation did not settle")}
}

// becomeLegacy switches to the 2025-11-25 path, on the server's answer,
// and runs the handshake.
func (c *Client) becomeLegacy(ctx context.Context) error {
	c.detectMu.Lock()
	defer c.detectMu.Unlock()
	return c.becomeLegacyLocked(ctx, false)
}

// becomeLegacyLocked switches to the 2025-11-25 path and runs the
// handshake; unanswered says the probe got no answer, which makes the era
// provisional. c.detectMu must be held.
func (c *Client) becomeLegacyLocked(ctx context.Context, unanswered bool) error {
	if !c.accepted(RevisionLegacy) {
		return &TransportError{Op: "initialize", Err: fmt.Errorf("%w: server is not a %s server and %s is below the minimum revision", ErrIncompatible, RevisionModern, RevisionLegacy)}
	}
	if e, _ := c.state(); e == eraLegacy {
		return c.initLegacyLocked(ctx)
	}
	if unanswered {
		// A legacy server may have exited on the probe, be stuck on it or
		// have garbled its answer: start from a fresh process.
		c.stdio.restart()
	}
	c.mu.Lock()
	c.era, c.version, c.legacyKey, c.provisional = eraLegacy, RevisionLegacy, "", unanswered
	c.reprobeAt = c.now().Add(c.reprobeWait)
	wait := c.reprobeWait
	c.mu.Unlock()
	if unanswered {
		c.opts.Logger.Info("server did not answer server/discover; using 2025-11-25 until it is probed again", "next_probe_in", wait)
	}
	return c.initLegacyLocked(ctx)
}

// initLegacyLocked runs initialize unless the current connection already
// did. c.detectMu must be held.
func (c *Client) initLegacyLocked(ctx context.Context) error {
	key := c.t.sessionKey()
	c.mu.Lock()
	done := c.legacyKey == key && key != ""
	c.mu.Unlock()
	if done {
		return nil
	}
	params, err := json.Marshal(map[string]json.RawMessage{
		"protocolVersion": mustJSON(RevisionLegacy),
		"capabilities":    c.capabilities(ctx),
		"clientInfo":      c.opts.ClientInfo,
	})
	if err != nil {
		return transportErr("initialize", err)
	}
	rctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	resp, err := c.t.roundTrip(rctx, &request{Method: "initialize", Params: params, Legacy: true})
	if err != nil {
		return err
	}
	if resp.Error != nil {
		rpc, perr := parseRPCError(resp.Error)
		if perr != nil {
			return transportErr("initialize", perr)
		}
		return &TransportError{Op: "initialize", Err: fmt.Errorf("%w: %w: %s", ErrIncompatible, errInitializeRefused, rpc.Error())}
	}
	var ir struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(resp.Result, &ir); err != nil {
		return transportErr("initialize", fmt.Errorf("malformed InitializeResult: %w", err))
	}
	if !c.accepted(ir.ProtocolVersion) || ir.ProtocolVersion == RevisionModern {
		return &TransportError{Op: "initialize", Err: fmt.Errorf("%w: server chose %q", ErrIncompatible, ir.ProtocolVersion)}
	}
	if err := c.t.notify(rctx, &request{Method: "notifications/initialized", Params: json.RawMessage(`{}`), Version: ir.ProtocolVersion, Legacy: true}); err != nil {
		return err
	}
	c.mu.Lock()
	c.legacyKey, c.version = key, ir.ProtocolVersion
	c.mu.Unlock()
	return nil
}

// sendLegacy makes one request inside the legacy session, redoing the
// handshake when the process was restarted or the session expired.
func (c *Client) sendLegacy(ctx context.Context, cl *call) (json.RawMessage, error) {
	for attempt := 0; ; attempt++ {
		c.detectMu.Lock()
		err := c.initLegacyLocked(ctx)
		c.detectMu.Unlock()
		if err != nil {
			return nil, err
		}
		_, version := c.state()
		fields := make(map[string]json.RawMessage, len(cl.fields))
		for k, v := range cl.fields {
			if k != "inputResponses" && k != "requestState" {
				fields[k] = v
			}
		}
		params, err := marshalJSON(fields)
		if err != nil {
			return nil, transportErr(cl.method, err)
		}
		rctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		resp, err := c.t.roundTrip(rctx, &request{Method: cl.method, Params: params, Version: version, Legacy: true})
		cancel()
		var se *statusError
		if err != nil && attempt == 0 && errors.As(err, &se) && se.Status == 404 && c.stdio == nil {
			// The legacy session expired: start a new one.
			c.t.resetSession()
			continue
		}
		if err != nil {
			return nil, err
		}
		if resp.Error != nil {
			rpc, perr := parseRPCError(resp.Error)
			if perr != nil {
				return nil, transportErr(cl.method, perr)
			}
			return nil, rpc
		}
		return resp.Result, nil
	}
}

// answerServerRequest answers what a legacy server asks of the client.
func (c *Client) answerServerRequest(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, json.RawMessage) {
	switch method {
	case "ping":
		return json.RawMessage(`{}`), nil
	case "elicitation/create", "sampling/createMessage", "roots/list":
		if c.opts.Inputs != nil {
			res, err := c.opts.Inputs.Answer(ctx, method, params)
			if err == nil {
				return res, nil
			}
			if method == "elicitation/create" {
				return json.RawMessage(`{"action":"decline"}`), nil
			}
			return nil, mustJSON(map[string]any{"code": -1, "message": "declined by host policy: " + err.Error()})
		}
		if method == "elicitation/create" {
			return json.RawMessage(`{"action":"decline"}`), nil
		}
		return nil, mustJSON(map[string]any{"code": -1, "message": "declined by host policy"})
	}
	return nil, json.RawMessage(`{"code":-32601,"message":"method not found"}`)
}

// resultHead holds the fields of a result the client acts on.
type resultHead struct {
	ResultType    *string                    `json:"resultType"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	RequestState  json.RawMessage            `json:"requestState"`
}

// inspect reads the resultType of a result: "complete" (also when absent),
// or "input_required" with its head; any other value is invalid.
func inspect(result json.RawMessage) (string, *resultHead, error) {
	trimmed := bytes.TrimSpace(result)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return "", nil, errors.New("result is not a JSON object")
	}
	var h resultHead
	if err := json.Unmarshal(trimmed, &h); err != nil {
		return "", nil, fmt.Errorf("malformed result: %w", err)
	}
	if h.ResultType == nil || *h.ResultType == "complete" {
		return "complete", &h, nil
	}
	if *h.ResultType == "input_required" {
		if h.InputRequests == nil && h.RequestState == nil {
			return "", nil, errors.New("input_required result with neither inputRequests nor requestState")
		}
		return "input_required", &h, nil
	}
	return "", nil, fmt.Errorf("unknown resultType %q", *h.ResultType)
}

// sendComplete makes a request whose result must be complete.
func (c *Client) sendComplete(ctx context.Context, cl *call) (json.RawMessage, error) {
	res, err := c.send(ctx, cl)
	if err != nil {
		return nil, err
	}
	rt, _, err := inspect(res)
	if err != nil {
		return nil, transportErr(cl.method, err)
	}
	if rt != "complete" {
		return nil, transportErr(cl.method, fmt.Errorf("resultType %q is not allowed for %s", rt, cl.method))
	}
	return res, nil
}

// sendWithInputs makes a request that may come back input_required, and
// answers and retries until the result is complete or MaxRounds retries
// are spent.
func (c *Client) sendWithInputs(ctx context.Context, cl *call) (json.RawMessage, error) {
	base := cl.fields
	for round := 0; ; round++ {
		res, err := c.send(ctx, cl)
		if err != nil {
			return nil, err
		}
		rt, head, err := inspect(res)
		if err != nil {
			return nil, transportErr(cl.method, err)
		}
		if rt == "complete" {
			return res, nil
		}
		if round >= c.opts.MaxRounds {
			return nil, transportErr(cl.method, fmt.Errorf("%w: the server still requires input after %d rounds", ErrRoundsExhausted, c.opts.MaxRounds))
		}
		responses, err := c.answerInputs(ctx, head.InputRequests)
		if err != nil {
			return nil, transportErr(cl.method, err)
		}
		// The retry is the original request with this round's answers
		// and the server's requestState, byte for byte; nothing carries
		// over from earlier rounds.
		fields := make(map[string]json.RawMessage, len(base)+2)
		for k, v := range base {
			fields[k] = v
		}
		fields["inputResponses"] = responses
		if head.RequestState != nil {
			fields["requestState"] = head.RequestState
		}
		next := *cl
		next.fields = fields
		cl = &next
	}
}

// answerInputs builds inputResponses: one answer per request key, declined
// requests left out.
func (c *Client) answerInputs(ctx context.Context, reqs map[string]json.RawMessage) (json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for key, raw := range reqs {
		var r struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("malformed input request %q: %w", key, err)
		}
		switch r.Method {
		case "elicitation/create":
			res := json.RawMessage(`{"action":"decline"}`)
			if c.opts.Inputs != nil {
				if a, err := c.opts.Inputs.Answer(ctx, r.Method, r.Params); err == nil {
					res = a
				}
			}
			out[key] = res
		case "sampling/createMessage", "roots/list":
			if c.opts.Inputs == nil {
				continue
			}
			a, err := c.opts.Inputs.Answer(ctx, r.Method, r.Params)
			if err != nil {
				c.opts.Logger.Debug("input request declined", "key", key, "method", r.Method, "reason", err)
				continue
			}
			out[key] = a
		default:
			c.opts.Logger.Debug("unknown input request left unanswered", "key", key, "method", r.Method)
		}
	}
	return marshalJSON(out)
}
