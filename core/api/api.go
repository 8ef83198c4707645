// Package api is the HTTP API of `host serve`: the discovery document,
// node execution, the state of plugins and packs, health probes and
// metrics. It serves whichever host is current, so a reload can switch
// hosts under it while calls in flight finish on the old one.
package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/httpstatus"
	"github.com/wophost/wophost/core/idempotency"
	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/strictjson"
	"github.com/wophost/wophost/sdk/wop"
)

// UnknownNodeLabel is the type_id label of the runs of nodes no loaded pack
// serves.
const UnknownNodeLabel = "(unknown)"

// Backend is the host the API serves; *host.Host satisfies it.
type Backend interface {
	// ServesNode reports whether a loaded pack serves the node typeID.
	ServesNode(typeID string) bool
	Registry() *registry.Registry
	Packs() []host.PackInfo
	Run(ctx context.Context, typeID string, input json.RawMessage, opts host.RunOptions) (*host.RunResult, error)
	// RunRecord returns the record of a run, for a replay.
	RunRecord(ctx context.Context, runID string) (*host.RunRecord, error)
	// ListRuns lists recorded runs, a page at a time.
	ListRuns(ctx context.Context, f host.RunFilter) (*host.RunPage, error)
	Ready() error
}

// Options configure a Server.
type Options struct {
	// Tokens are the accepted bearer tokens; none means no authentication.
	Tokens []string
	// TokenScopes holds the scopes of tokens of Tokens that carry any
	// (config.ScopeAllRuns).
	TokenScopes map[string][]string
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes int64
	// Metrics serves GET /metrics when set.
	Metrics http.Handler
	// OnRun, when set, is told of every node execution.
	OnRun func(typeID string, took time.Duration, err error)
	// Agents lists the agent registry for GET /v1/agents; the route
	// answers 404 while it is nil or returns ok = false.
	Agents func(Backend) (list any, ok bool)
	Logger hclog.Logger
}

// Server is the API's http.Handler.
type Server struct {
	opts    Options
	current *Current
	mux     *http.ServeMux
	// handler is mux behind the cross-origin check.
	handler http.Handler
	// tokenSums holds SHA-256 sums of the tokens: comparing fixed-size
	// sums in constant time leaks neither a token nor its length.
	tokenSums [][sha256.Size]byte
}

// New returns the API over the hosts that current holds.
func New(current *Current, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	s := &Server{opts: opts, current: current, mux: http.NewServeMux()}
	for _, t := range opts.Tokens {
		s.tokenSums = append(s.tokenSums, sha256.Sum256([]byte(t)))
	}
	routes := []route{
		{"GET", "/healthz", http.HandlerFunc(s.healthz)},
		{"GET", "/readyz", http.HandlerFunc(s.readyz)},
		{"GET", "/.well-known/openwop", s.authed(s.discovery)},
		{"POST", "/v1/nodes/{node}", s.authed(s.execute)},
		{"GET", "/v1/runs", s.authed(s.listRuns)},
		{"GET", "/v1/runs/{run}", s.authed(s.getRun)},
		{"POST", "/v1/runs/{run}", s.authed(s.replay)},
		{"GET", "/v1/plugins", s.authed(s.plugins)},
		{"GET", "/v1/packs", s.authed(s.packs)},
		{"GET", "/v1/agents", s.authed(s.agents)},
		{"GET", "/host/effect-seams", s.authed(s.effectSeams)},
	}
	if opts.Metrics != nil {
		routes = append(routes, route{"GET", "/metrics", s.authed(opts.Metrics.ServeHTTP)})
	}
	var paths []string
	methods := map[string][]string{}
	for _, r := range routes {
		s.mux.Handle(r.method+" "+r.path, r.h)
		if methods[r.path] == nil {
			paths = append(paths, r.path)
		}
		methods[r.path] = append(methods[r.path], r.method)
	}
	for _, path := range paths {
		// Every other method on the path: 405 in the error envelope,
		// rather than the mux's plain text. A path several routes share
		// is registered once, allowing the methods of all.
		allow := allowed(methods[path])
		if path == "/v1/runs/{run}" {
			// A run's record is read at its id, and replayed at its id
			// and :replay: each allows its own method.
			allow = func(req *http.Request) string {
				if strings.HasSuffix(req.PathValue("run"), replaySuffix) {
					return "POST"
				}
				return "GET, HEAD"
			}
		}
		s.mux.HandleFunc(path, func(w http.ResponseWriter, req *http.Request) {
			methodNotAllowed(w, req, allow(req))
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		writeError(w, wop.Errorf(wop.CodeNotFound, "no route %s %s", clip(req.Method, 32), clip(req.URL.Path, maxEchoBytes)))
	})
	// A browser on another site may send a form or a simple fetch here
	// with whatever credentials it holds, and an API without tokens takes
	// any: every request that changes something (a POST) must come from
	// this origin or from no browser at all.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &wop.Error{Code: httpstatus.CodeForbidden,
			Message: fmt.Sprintf("a %s from another site is refused: the request's Origin (%s) is not this host's", clip(r.Method, 32), clip(originOf(r), maxEchoBytes))})
	}))
	s.handler = cop.Handler(s.mux)
	return s
}

// originOf names where a browser says a request comes from.
func originOf(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" {
		return o
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return "Sec-Fetch-Site: " + site
	}
	return "none given"
}

// Mount serves h for every path under prefix (which ends in "/"), behind
// the API's cross-origin check; h authenticates with Authorized. Mount
// before serving.
func (s *Server) Mount(prefix string, h http.Handler) {
	s.mux.Handle(prefix, h)
}

// Authorized reports whether r carries a bearer token the API accepts;
// every request does when the API has no tokens.
func (s *Server) Authorized(r *http.Request) bool {
	return len(s.tokenSums) == 0 || s.authorized(r.Header.Get("Authorization"))
}

// RunScope returns whose runs r's credential may see: every run with no
// tokens or a token with the runs:all scope (all is true), otherwise the
// runs whose record names owner, the credential's scope.
func (s *Server) RunScope(r *http.Request) (owner string, all bool) {
	return s.visibility(r)
}

// route is one method and path pattern of the API and its handler.
type route struct {
	method, path string
	h            http.Handler
}

// allowed is the Allow header of a path whose routes take methods: GET
// takes HEAD too.
func allowed(methods []string) func(*http.Request) string {
	var list []string
	for _, m := range methods {
		list = append(list, m)
		if m == "GET" {
			list = append(list, "HEAD")
		}
	}
	allow := strings.Join(list, ", ")
	return func(*http.Request) string { return allow }
}

// methodNotAllowed answers a method the path does not take: 405 with
// Allow, in the error envelope.
func methodNotAllowed(w http.ResponseWriter, req *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, &wop.Error{Code: httpstatus.CodeMethodNotAllowed,
		Message: fmt.Sprintf("%s is not allowed here; the allowed methods are %s", clip(req.Method, 32), allow)})
}

// maxEchoBytes bounds how much of a caller's path an error quotes back.
const maxEchoBytes = 300

// clip returns s, or its first n bytes and an ellipsis, so that an error
// never echoes a caller's oversized input whole.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// authed wraps h with bearer-token authentication when tokens are set.
func (s *Server) authed(h http.HandlerFunc) http.Handler {
	if len(s.tokenSums) == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="wophost"`)
			writeError(w, &wop.Error{Code: httpstatus.CodeUnauthenticated, Message: "a valid bearer token is required"})
			return
		}
		h(w, r)
	})
}

func (s *Server) authorized(header string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := 0
	for _, want := range s.tokenSums {
		match |= subtle.ConstantTimeCompare(sum[:], want[:])
	}
	return match == 1
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	b, release := s.current.Acquire()
	defer release()
	if b == nil {
		writeError(w, notReady("no host is running"))
		return
	}
	if err := b.Ready(); err != nil {
		writeError(w, notReady(err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// discovery serves the advertisement with a strong ETag over its exact
// bytes, so a poller can revalidate cheaply.
func (s *Server) discovery(w http.ResponseWriter, r *http.Request) {
	b, release := s.current.Acquire()
	defer release()
	if b == nil {
		writeError(w, errNoHost())
		return
	}
	doc := b.Registry().Document()
	sum := sha256.Sum256(doc)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-cache")
	if etagMatches(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
}

// etagMatches implements If-None-Match's weak comparison (RFC 9110
// §13.1.2) against one strong tag.
func etagMatches(header, etag string) bool {
	for _, candidate := range strings.Split(header, ",") {
		candidate = strings.TrimSpace(candidate)
		if candidate == "*" || strings.TrimPrefix(candidate, "W/") == etag {
			return true
		}
	}
	return false
}

// executeRequest is the body of POST /v1/nodes/{typeId}:execute.
type executeRequest struct {
	Input json.RawMessage `json:"input"`
	// IdempotencyKey is the body's spelling of the Idempotency-Key
	// header; either may be given, both only with the same value.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	TimeoutMs      int64  `json:"timeoutMs,omitempty"`
}

const executeSuffix = ":execute"

// Header names of the idempotency rules.
const (
	// HeaderIdempotencyKey carries a request's idempotency key.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderIdempotentReplay is "true" on an answer that repeats the
	// recorded outcome of the request's idempotency key.
	HeaderIdempotentReplay = "OpenWOP-Idempotent-Replay"
)

// idempotencyKey returns the request's key from the Idempotency-Key
// header and the body's idempotencyKey, which may each be absent but
// must agree when both are given.
func idempotencyKey(r *http.Request, body string) (string, error) {
	values := r.Header.Values(HeaderIdempotencyKey)
	switch {
	case len(values) > 1:
		return "", wop.Errorf(idempotency.CodeKeyInvalid, "more than one %s header", HeaderIdempotencyKey)
	case len(values) == 0:
		return body, nil
	case values[0] == "":
		return "", wop.Errorf(idempotency.CodeKeyInvalid, "the %s header is empty", HeaderIdempotencyKey)
	case body != "" && body != values[0]:
		return "", wop.Errorf(idempotency.CodeKeyInvalid, "the %s header and the body's idempotencyKey differ; give one, or both with the same value", HeaderIdempotencyKey)
	}
	return values[0], nil
}

// credential returns the bearer token the request authenticated with,
// or "" when the API has no tokens.
func (s *Server) credential(r *http.Request) string {
	if len(s.tokenSums) == 0 {
		return ""
	}
	_, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return strings.TrimSpace(token)
}

// visibility returns whose runs the request's credential may see and
// replay: every run (all) for an API without tokens and for a token with
// the runs:all scope, otherwise only the runs whose owner is owner, the
// scope of the token, which made them. A run made without a credential
// (by the operator's CLI, or before tokens were set) has the empty owner,
// which is no token's scope.
func (s *Server) visibility(r *http.Request) (owner string, all bool) {
	credential := s.credential(r)
	if credential == "" || slices.Contains(s.opts.TokenScopes[credential], config.ScopeAllRuns) {
		return "", true
	}
	return idempotency.Scope(credential), false
}

// maySee reports whether the request's credential may see and replay a
// run whose record names owner (visibility).
func (s *Server) maySee(r *http.Request, owner string) bool {
	want, all := s.visibility(r)
	return all || subtle.ConstantTimeCompare([]byte(owner), []byte(want)) == 1
}

func (s *Server) execute(w http.ResponseWriter, r *http.Request) {
	node := r.PathValue("node")
	typeID, ok := strings.CutSuffix(node, executeSuffix)
	if !ok || typeID == "" {
		writeError(w, wop.Errorf(wop.CodeNotFound, "no route POST %s; nodes run at POST /v1/nodes/{typeId}:execute", clip(r.URL.Path, maxEchoBytes)))
		return
	}
	if len(typeID) > packmanifest.MaxTypeIDBytes {
		// No pack can declare it; neither the answer nor a metric label
		// carries it.
		writeError(w, wop.Errorf(wop.CodeNotFound, "no node has a typeId of %d bytes; a typeId is at most %d", len(typeID), packmanifest.MaxTypeIDBytes))
		return
	}
	var req executeRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		writeError(w, err)
		return
	}
	if len(req.Input) == 0 {
		req.Input = json.RawMessage("{}")
	}
	if req.TimeoutMs < 0 {
		writeError(w, wop.Errorf(wop.CodeValidation, `field "timeoutMs": must not be negative`))
		return
	}
	key, err := idempotencyKey(r, req.IdempotencyKey)
	if err != nil {
		writeError(w, err)
		return
	}
	b, release := s.current.Acquire()
	defer release()
	if b == nil {
		writeError(w, errNoHost())
		return
	}
	ctx := r.Context()
	if key != "" {
		// A keyed run goes on to its outcome when the client goes away:
		// the client's retry then gets that outcome instead of cutting
		// a second run short, and no run is cut between its effect and
		// its record. Its own deadline still bounds it.
		ctx = context.WithoutCancel(ctx)
	}
	start := time.Now()
	res, err := b.Run(ctx, typeID, req.Input, host.RunOptions{
		Timeout:          msTimeout(req.TimeoutMs),
		IdempotencyKey:   key,
		IdempotencyScope: idempotency.Scope(s.credential(r)),
		Traceparent:      r.Header.Get("traceparent"),
		Record:           true,
	})
	if s.opts.OnRun != nil {
		// A caller chooses the typeId: only the host's own nodes become
		// metric labels, so callers cannot grow the series at will.
		label := typeID
		if !b.ServesNode(typeID) {
			label = UnknownNodeLabel
		}
		s.opts.OnRun(label, time.Since(start), err)
	}
	replayed := res != nil && res.Replayed
	if replayed {
		// Set as spelled: Header.Set would send "Openwop-Idempotent-Replay".
		w.Header()[HeaderIdempotentReplay] = []string{"true"}
	}
	if err != nil {
		e := wop.AsError(err)
		s.opts.Logger.Debug("node execution failed", "type_id", typeID, "code", e.Code, "error", e.Message, "replayed", replayed)
	}
	if res == nil || res.RunID == "" {
		// Refused before any pack code ran.
		writeError(w, err)
		return
	}
	// The node ran: its outcome, success or failure, is the answer.
	writeJSON(w, http.StatusOK, httpstatus.NewOutcome(res.RunID, res.Output, err))
}

func (s *Server) plugins(w http.ResponseWriter, _ *http.Request) {
	b, release := s.current.Acquire()
	defer release()
	if b == nil {
		writeError(w, errNoHost())
		return
	}
	writeJSON(w, http.StatusOK, b.Registry().Records())
}

// effectSeams serves OpenWOP's effect-seam manifest of what the current
// host advertises: its side-effecting methods and what guards them on
// replay.
func (s *Server) effectSeams(w http.ResponseWriter, _ *http.Request) {
	b, release := s.current.Acquire()
	defer release()
	if b == nil {
		writeError(w, errNoHost())
		return
	}
	writeJSON(w, http.StatusOK, host.EffectSeamsOf(b.Registry()))
}

func (s *Server) packs(w http.ResponseWriter, _ *http.Request) {
	b, release := s.current.Acquire()
	defer release()
	if b == nil {
		writeError(w, errNoHost())
		return
	}
	writeJSON(w, http.StatusOK, b.Packs())
}

func (s *Server) agents(w http.ResponseWriter, r *http.Request) {
	b, release := s.current.Acquire()
	defer release()
	if b != nil && s.opts.Agents != nil {
		if list, ok := s.opts.Agents(b); ok {
			writeJSON(w, http.StatusOK, list)
			return
		}
	}
	writeError(w, ErrAgentsNotServed())
}

// ErrAgentsNotServed refuses a listing of the agent registry while
// agents.manifestRuntime is not advertised: the listing exists only with
// it, so it is not found, and details.capability names what is missing.
func ErrAgentsNotServed() error {
	return wop.Errorf(wop.CodeNotFound, "the agent registry is listed while host.agents.manifestRuntime is advertised, and it is not").
		WithCapability("host.agents.manifestRuntime")
}

// decodeBody reads one JSON object of at most limit bytes into v, by the
// host's one strict reading (sdk/strictjson): unknown members, a member
// spelled in another case or named twice, invalid UTF-8 and trailing
// data are refused.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if limit > 0 {
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return wop.Errorf(httpstatus.CodePayloadTooLarge, "request body is larger than %d bytes", tooBig.Limit)
		}
		return wop.Errorf(wop.CodeValidation, "request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return wop.Errorf(wop.CodeValidation, "request body: empty; send a JSON object")
	}
	return strictjson.Decode(body, v, "request body")
}

// notReady is /readyz's 503: runner_unavailable, its reason as the
// message and in details with status "not ready", retryable since the
// host becomes ready again on its own or at a reload.
func notReady(reason string) error {
	return wop.Errorf(wop.CodeUnavailable, "%s", reason).WithRetryable(true).
		WithDetails(map[string]string{"status": "not ready", "reason": reason})
}

// errNoHost refuses a request while no host runs (between a failed
// start and the next reload): retryable, since a reload may bring one.
func errNoHost() error {
	return wop.Errorf(wop.CodeUnavailable, "no host is running").WithRetryable(true)
}

// writeError answers a refused request in OpenWOP's error envelope with
// the status of its code (httpstatus.Refusal), and Retry-After when a
// retry may succeed.
func writeError(w http.ResponseWriter, err error) {
	status, env := httpstatus.Refusal(err)
	if httpstatus.RetryAfter(status, err) {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, env)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(fmt.Sprintf(`{"error":"internal_error","message":%q,"details":{"retryable":false}}`, err.Error()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
