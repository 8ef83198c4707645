package dispatch

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/wophost/wophost/internal/canonjson"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/wop"
)

// Invocation is one host-service call a run made, as the run's invocation
// log keeps it: enough to answer the same call again on a replay without
// calling the plugin, and to tell when a replay's call differs.
type Invocation struct {
	// Seq numbers the run's calls from 1, in the order they arrived.
	Seq int `json:"seq"`
	// Caller is who made the call: "pack:<name>", "plugin:<name>", and
	// Agent the agent instance a plugin called for.
	Caller string `json:"caller"`
	Agent  string `json:"agent,omitempty"`
	// Depth is the call's hop count: 1 for the node's own calls, more for
	// the callbacks of the plugins it called.
	Depth  int    `json:"depth"`
	Family string `json:"family"`
	Method string `json:"method"`
	// Key is the invocation key (InvocationKey): equal for two calls that
	// ask the same thing, whatever run they belong to.
	Key string `json:"key"`
	// Pure marks a call of a method declared pure, which a replay runs
	// live and compares.
	Pure bool `json:"pure,omitempty"`
	// Result is the answer the caller got, or Error the refusal.
	Result json.RawMessage `json:"result,omitempty"`
	Error  *wop.Error      `json:"error,omitempty"`
	// Redacted says the outcome held a sensitive value of the host's
	// configuration and was left out; a replay cannot answer from it.
	Redacted bool `json:"redacted,omitempty"`
	// Source is set on a replay's own log: "log" when the call was
	// answered from the source run's log, "live" when it ran.
	Source string `json:"source,omitempty"`
	// Direct marks a call the node made on a direct channel, which the
	// plugin reported when the run ended.
	Direct bool `json:"direct,omitempty"`
	// ReportedBy is "pack" for a direct call the host took from the
	// pack's account, its plugin having given none when the run ended.
	ReportedBy     string    `json:"reportedBy,omitempty"`
	StartedAt      time.Time `json:"startedAt"`
	DurationMicros int64     `json:"durationMicros"`
}

// ReportedByPack is Invocation.ReportedBy of a direct call the pack's
// account reported.
const ReportedByPack = "pack"

// Sources of a replayed call (Invocation.Source).
const (
	SourceLog  = "log"
	SourceLive = "live"
)

// InvocationLog is the list of a run's host-service calls, bounded in
// calls and bytes. A log cut short says so: a replay cannot answer the
// calls it lost.
type InvocationLog struct {
	Calls []Invocation `json:"calls"`
	// Truncated is set when calls were dropped at the bounds; Dropped
	// counts them.
	Truncated bool `json:"truncated,omitempty"`
	Dropped   int  `json:"dropped,omitempty"`
	// CutReason says why the first call was lost.
	CutReason string `json:"cutReason,omitempty"`
}

// perRunFields lists, per family and method, the request fields that
// differ between two runs asking the same thing and are left out of the
// invocation key: the idempotency keys packs derive from the run id.
// Everything else of the request is part of the key; a vendor family's
// requests count whole (per-run values belong in the call context, which
// the key never includes).
func perRunFields(family, method string) []string {
	switch {
	case family == wop.FamilyAIEnvelope && method == aienvelope.MethodGenerate,
		family == wop.FamilyAgentRuntime && (method == agentruntime.MethodSpawn || method == agentruntime.MethodMessageSend):
		return []string{"idempotencyKey"}
	}
	return nil
}

// InvocationKey returns the invocation key of a call: "sha256:" and the
// hex SHA-256 of the canonical JSON (RFC 8785) of
// {"family", "method", "request"}, the request without its per-run fields
// (perRunFields). A request that is not JSON counts as the string of its
// bytes, so that every call has a key.
func InvocationKey(family, method string, payload []byte) string {
	req := canonicalRequest(family, method, payload)
	var b bytes.Buffer
	b.WriteString(`{"family":`)
	b.WriteString(strconv.Quote(family))
	b.WriteString(`,"method":`)
	b.WriteString(strconv.Quote(method))
	b.WriteString(`,"request":`)
	b.Write(req)
	b.WriteString(`}`)
	// The three members are written in RFC 8785's key order; the family
	// and method are plain ASCII names, which strconv.Quote writes as
	// canonical JSON does.
	sum := sha256.Sum256(b.Bytes())
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonicalRequest is the request's canonical JSON, per-run fields left
// out.
func canonicalRequest(family, method string, payload []byte) []byte {
	c, err := canonjson.Transform(payload)
	if err != nil {
		s, _ := json.Marshal(string(payload)) // a Go string always marshals
		return s
	}
	if omit := perRunFields(family, method); len(omit) > 0 {
		c = withoutMembers(c, omit)
	}
	return c
}

// withoutMembers returns canonical JSON c without the members of its
// top-level object named in names (c itself when it is no object). It
// scans rather than decodes: in canonical JSON a member name is a plain
// string whose only escapes are backslash sequences, and the text has no
// whitespace, so the members are found by depth and quotes alone.
func withoutMembers(c []byte, names []string) []byte {
	if len(c) < 2 || c[0] != '{' {
		return c
	}
	out := make([]byte, 0, len(c))
	out = append(out, '{')
	depth, inString, escaped := 0, false, false
	start := 1 // where the current member begins
	for i := 1; i < len(c); i++ {
		b := c[i]
		switch {
		case escaped:
			escaped = false
			continue
		case inString:
			switch b {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
			continue
		case b == '"':
			inString = true
			continue
		case b == '{' || b == '[':
			depth++
			continue
		case (b == '}' || b == ']') && depth > 0:
			depth--
			continue
		case depth > 0 || (b != ',' && b != '}'):
			continue
		}
		// c[start:i] is one whole member of the top-level object.
		if member := c[start:i]; len(member) > 0 && !namedOneOf(member, names) {
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, member...)
		}
		start = i + 1
	}
	return append(out, '}')
}

// namedOneOf reports whether the canonical member "name":value has one of
// names.
func namedOneOf(member []byte, names []string) bool {
	for _, n := range names {
		if len(member) > len(n)+2 && member[0] == '"' && string(member[1:len(n)+1]) == n && member[len(n)+1] == '"' && member[len(n)+2] == ':' {
			return true
		}
	}
	return false
}

// size is what an invocation counts against the log's byte bound: its
// outcome and a fixed allowance for the rest.
func (inv *Invocation) size() int {
	n := 256 + len(inv.Result)
	if inv.Error != nil {
		n += len(inv.Error.Message) + len(inv.Error.Details)
	}
	return n
}
