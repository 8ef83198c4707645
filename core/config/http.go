package config

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Defaults of the http block.
const (
	DefaultListen            = "127.0.0.1:7427"
	DefaultShutdownTimeout   = 30 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConnections    = 1024
)

// DefaultHTTP returns the settings of a host block without an http block.
func DefaultHTTP() HTTP {
	return HTTP{
		Listen: DefaultListen, ShutdownTimeout: DefaultShutdownTimeout,
		ReadTimeout: DefaultReadTimeout, ReadHeaderTimeout: DefaultReadHeaderTimeout, IdleTimeout: DefaultIdleTimeout,
		MaxHeaderBytes: DefaultMaxHeaderBytes, MaxConnections: DefaultMaxConnections,
		// The default listener is loopback, where the console is on.
		Console: true,
	}
}

// HTTP holds the settings of the HTTP API that `host serve` listens with.
type HTTP struct {
	// Listen is the TCP address, host:port.
	Listen string
	// Tokens are the bearer tokens the API accepts, those of the tokens
	// attribute and of every token block; empty means no authentication,
	// which is only allowed on loopback unless AllowUnauthenticated is set.
	Tokens []string
	// TokenScopes holds, for each token given in a token block, the scopes
	// it carries (ScopeAllRuns). A token of the tokens attribute carries
	// none: it sees the runs it made, and only those.
	TokenScopes map[string][]string
	// AllowUnauthenticated lets the API listen beyond loopback without a
	// token. It exists so that doing so is a written decision.
	AllowUnauthenticated bool
	// ShutdownTimeout bounds how long a stopping host waits for calls in
	// flight before it stops the plugins under them.
	ShutdownTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included, and
	// ReadHeaderTimeout its headers: a client that trickles its request
	// cannot hold a connection longer. There is no write timeout: a
	// node's answer takes as long as the node runs (run_timeout bounds it).
	ReadTimeout       time.Duration
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a kept-alive connection with no request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes int
	// MaxConnections bounds the connections served at once; more wait to
	// be accepted.
	MaxConnections int
	// Console serves the operator console under /ui/, behind the same
	// tokens as the API. The console attribute sets it; without one it is
	// on when the listener is loopback and off otherwise.
	Console bool

	DefRange    hcl.Range
	ListenRange hcl.Range
}

type rawHTTP struct {
	Listen               *hcl.Attribute `hcl:"listen"`
	Tokens               *hcl.Attribute `hcl:"tokens"`
	AllowUnauthenticated *hcl.Attribute `hcl:"allow_unauthenticated"`
	ShutdownTimeout      *hcl.Attribute `hcl:"shutdown_timeout"`
	ReadTimeout          *hcl.Attribute `hcl:"read_timeout"`
	ReadHeaderTimeout    *hcl.Attribute `hcl:"read_header_timeout"`
	IdleTimeout          *hcl.Attribute `hcl:"idle_timeout"`
	MaxHeaderBytes       *hcl.Attribute `hcl:"max_header_bytes"`
	MaxConnections       *hcl.Attribute `hcl:"max_connections"`
	Console              *hcl.Attribute `hcl:"console"`
	Token                []*rawToken    `hcl:"token,block"`
	DefRange             hcl.Range      `hcl:",def_range"`
}

// ScopeAllRuns is the scope of a token that may replay every run, not
// only those it made: an operator's or an auditor's.
const ScopeAllRuns = "runs:all"

// scopes lists the scopes a token block may give.
var scopes = []string{ScopeAllRuns}

type rawToken struct {
	Name     string         `hcl:"name,label"`
	Value    *hcl.Attribute `hcl:"value"`
	Scopes   *hcl.Attribute `hcl:"scopes"`
	DefRange hcl.Range      `hcl:",def_range"`
}

// http validates the host block's http block, if any.
func (d *decoder) http(blocks []*rawHTTP) *HTTP {
	if len(blocks) == 0 {
		return nil
	}
	for _, dup := range blocks[1:] {
		d.errorf(dup.DefRange, "Duplicate http block",
			"An http block is declared at %s and again at %s; only one is allowed.",
			posString(blocks[0].DefRange), posString(dup.DefRange))
	}
	r := blocks[0]
	def := DefaultHTTP()
	h := &def
	h.DefRange, h.ListenRange = r.DefRange, r.DefRange
	listenOK := true
	if s, ok := d.stringAttr(r.Listen); ok {
		h.ListenRange = r.Listen.Expr.Range()
		if _, _, err := net.SplitHostPort(s); err != nil {
			d.errorf(h.ListenRange, "Invalid listen", "listen must be host:port, such as \"127.0.0.1:7427\" or \":7427\": %s.", err)
			listenOK = false
		} else {
			h.Listen = s
		}
	} else if r.Listen != nil {
		listenOK = false
	}
	var tokens []string
	if d.attr(r.Tokens, &tokens) {
		for i, t := range tokens {
			if t == "" {
				// The value is a secret: name its position, never the value.
				d.errorf(r.Tokens.Expr.Range(), "Empty token", "tokens[%d] is empty; an empty bearer token would let anyone in.", i)
			}
		}
		h.Tokens = tokens
	}
	d.tokenBlocks(r.Token, h)
	d.attr(r.AllowUnauthenticated, &h.AllowUnauthenticated)
	if dur, ok := d.durationAttr(r.ShutdownTimeout); ok {
		h.ShutdownTimeout = dur
	}
	for _, t := range []struct {
		attr *hcl.Attribute
		to   *time.Duration
	}{{r.ReadTimeout, &h.ReadTimeout}, {r.ReadHeaderTimeout, &h.ReadHeaderTimeout}, {r.IdleTimeout, &h.IdleTimeout}} {
		if dur, ok := d.durationAttr(t.attr); ok {
			*t.to = dur
		}
	}
	if r.ReadHeaderTimeout != nil && h.ReadHeaderTimeout > h.ReadTimeout {
		d.errorf(r.ReadHeaderTimeout.Expr.Range(), "Invalid read_header_timeout",
			"read_header_timeout (%s) is longer than read_timeout (%s), which bounds the headers too.", h.ReadHeaderTimeout, h.ReadTimeout)
	}
	if n, ok := d.intAttr(r.MaxHeaderBytes, 4<<10, 1<<20); ok {
		h.MaxHeaderBytes = n
	}
	if n, ok := d.intAttr(r.MaxConnections, 1, 1<<20); ok {
		h.MaxConnections = n
	}
	h.Console = IsLoopback(h.Listen)
	d.attr(r.Console, &h.Console)
	if listenOK && len(h.Tokens) == 0 && !h.AllowUnauthenticated && !IsLoopback(h.Listen) {
		d.errorf(h.ListenRange, "Unauthenticated listener beyond loopback",
			"listen = %q accepts connections from other machines, and no tokens are set. Set tokens (for example tokens = [env(\"WOPHOST_API_TOKEN\")]), listen on 127.0.0.1, or set allow_unauthenticated = true to accept that anyone who can reach the port can run nodes.", h.Listen)
	}
	return h
}

// tokenBlocks validates the http block's token blocks and adds their
// tokens and scopes to h.
func (d *decoder) tokenBlocks(blocks []*rawToken, h *HTTP) {
	seen := map[string]hcl.Range{}
	for _, b := range blocks {
		if prev, ok := seen[b.Name]; ok {
			d.errorf(b.DefRange, "Duplicate token block",
				"A token block %q is declared at %s and again here; each token block needs a name of its own.", b.Name, posString(prev))
			continue
		}
		seen[b.Name] = b.DefRange
		if b.Value == nil {
			d.errorf(b.DefRange, "Missing token value", "token %q has no value; set value, for example value = env(\"WOPHOST_OPERATOR_TOKEN\").", b.Name)
			continue
		}
		value, ok := d.stringAttr(b.Value)
		if !ok {
			// stringAttr refuses an empty value too.
			continue
		}
		if slices.Contains(h.Tokens, value) {
			d.errorf(b.Value.Expr.Range(), "Token given twice",
				"token %q has the value of another token of this http block; a token has one set of scopes, so give each value once.", b.Name)
			continue
		}
		var given []string
		if b.Scopes != nil && !d.attr(b.Scopes, &given) {
			continue
		}
		valid := true
		for i, sc := range given {
			if !slices.Contains(scopes, sc) {
				d.errorf(b.Scopes.Expr.Range(), "Unknown scope",
					"token %q: scopes[%d] is %q; the scopes are %s.", b.Name, i, sc, strings.Join(scopes, ", "))
				valid = false
			}
		}
		if !valid {
			continue
		}
		h.Tokens = append(h.Tokens, value)
		if h.TokenScopes == nil {
			h.TokenScopes = map[string][]string{}
		}
		h.TokenScopes[value] = given
	}
}

// IsLoopback reports whether the listen address addr (host:port) accepts
// connections from this machine only. An empty host listens on every
// interface, so it is not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
