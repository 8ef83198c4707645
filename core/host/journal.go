package host

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/sdk/wop"
)

// minSecretBytes is the shortest configured secret the invocation log
// looks for: shorter values ("1", "true") would match ordinary answers
// and hide them without protecting anything.
const minSecretBytes = 6

// secrets collects the values of the configuration the host treats as
// secret: the sensitive attributes of every capability's config, the
// storage dsn and the API tokens. The invocation log keeps no outcome
// that holds one.
func (h *Host) secrets() [][]byte {
	var out [][]byte
	add := func(s string) {
		if len(s) < minSecretBytes {
			return
		}
		out = append(out, []byte(s))
		// The same value inside a JSON string, where it is escaped.
		if q, err := json.Marshal(s); err == nil && !bytes.Equal(q[1:len(q)-1], []byte(s)) {
			out = append(out, q[1:len(q)-1])
		}
	}
	add(h.cfg.Host.Storage.DSN)
	// A host block without an http block has no tokens (HTTP is nil).
	if h.cfg.Host.HTTP != nil {
		for _, t := range h.cfg.Host.HTTP.Tokens {
			add(t)
		}
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, c := range h.caps {
		if len(c.config) == 0 {
			continue
		}
		for _, v := range config.SensitiveValues(c.config, c.schema.SensitivePaths()) {
			add(v)
		}
	}
	return out
}

// holdsSecret reports whether b contains a configured secret. The set is
// read once per host: a reload builds a new host with its own.
func (h *Host) holdsSecret(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	h.secretsOnce.Do(func() { h.secretValues = h.secrets() })
	for _, s := range h.secretValues {
		if bytes.Contains(b, s) {
			return true
		}
	}
	return false
}

// liveMatcher returns a function that picks the calls --live names: each
// spec is a family ("aiEnvelope", "acme.kv") or a family and method
// ("mcp.callTool", "acme.kv.put").
func liveMatcher(specs []string) (func(family, method string) bool, error) {
	for _, s := range specs {
		if s == "" || strings.ContainsAny(s, " \t\n/") || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") {
			return nil, wop.Errorf(wop.CodeValidation, "live %q: want FAMILY or FAMILY.METHOD", s)
		}
	}
	if len(specs) == 0 {
		return nil, nil
	}
	return func(family, method string) bool {
		for _, s := range specs {
			if s == family || s == family+"."+method {
				return true
			}
		}
		return false
	}, nil
}

// trackCalls starts the invocation log of run (and, with opts.Replay, its
// replay), when the run keeps a record or replays one.
func (h *Host) trackCalls(runID string, opts RunOptions) (*dispatch.RunLog, func(), error) {
	if !opts.Record && opts.Replay == nil {
		return nil, func() {}, nil
	}
	var src *dispatch.ReplaySource
	if opts.Replay != nil {
		live, err := liveMatcher(opts.Live)
		if err != nil {
			return nil, nil, err
		}
		src = &dispatch.ReplaySource{RunID: opts.Replay.RunID, Log: opts.Replay.Invocations, Live: live,
			// A side-effect node named in live runs again, effects and all.
			Branch: slices.Contains(opts.Live, opts.Replay.TypeID) && h.nodeRole(opts.Replay.TypeID) == packmanifest.RoleSideEffect}
	} else if len(opts.Live) > 0 {
		return nil, nil, wop.Errorf(wop.CodeValidation, "live calls are chosen only for a replay")
	}
	runs := h.cfg.Host.Runs
	if src == nil && runs.LogMaxCalls == 0 {
		// No log is kept: the run's calls pass untracked.
		return nil, func() {}, nil
	}
	l, stop := h.journal.Track(runID, dispatch.LogLimits{MaxCalls: runs.LogMaxCalls, MaxBytes: runs.LogMaxBytes}, src)
	return l, stop, nil
}

// nodeRole is the role the loaded manifest gives node typeID, or "".
func (h *Host) nodeRole(typeID string) string {
	h.mu.RLock()
	p, ok := h.byTypeID[typeID]
	h.mu.RUnlock()
	if !ok || p.manifest == nil {
		return ""
	}
	node, _ := p.manifest.Node(typeID)
	return node.Role
}

// replayOutcome applies a replay's verdict to the node's outcome: a call
// that failed the replay fails the run, whatever the node made of it.
func replayOutcome(l *dispatch.RunLog, out json.RawMessage, err error) (json.RawMessage, error) {
	if l == nil {
		return out, err
	}
	if fatal := l.Fatal(); fatal != nil {
		return nil, fatal
	}
	return out, err
}
