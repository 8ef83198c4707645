package wasmpack

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/internal/nodepack"
	"github.com/wophost/wophost/sdk/wop"
)

// Run identifies the node run, as the request's nodeContext gives it.
type Run struct {
	RunID    string
	NodeID   string
	TenantID string
	// TypeID is the node's typeId.
	TypeID  string
	Attempt int
	// Configurable is the run's configurable object, raw.
	Configurable json.RawMessage
	// Agent is the agent the node runs for, raw; JSON null or empty when
	// none.
	Agent json.RawMessage
}

// Ctx is what a running node sees: a context.Context, one field per core
// family, and the host's imports. A family's field is nil unless the host
// advertises it; its methods are safe on nil and then fail with
// capability_not_provided.
type Ctx struct {
	context.Context

	AIEnvelope    *aienvelope.Client
	PromptLibrary *promptlibrary.Client
	AgentRuntime  *agentruntime.Client
	MCP           *mcp.Client

	// Run identifies this node run.
	Run Run
	// Logger writes to the host's log through openwop_log.
	Logger Logger

	host       imports
	advertised map[string]map[string]json.RawMessage
}

// newCtx returns the Ctx of a run of the node typeID, with the family
// clients the advertisement ad (wophost_advertised's answer) allows.
func newCtx(ctx context.Context, host imports, run Run, ad map[string]map[string]json.RawMessage) *Ctx {
	c := &Ctx{
		Context:    wop.WithCallContext(ctx, wop.CallContext{RunID: run.RunID, NodeID: run.NodeID, TypeID: run.TypeID}),
		Run:        run,
		Logger:     Logger{host: host},
		host:       host,
		advertised: ad,
	}
	cl := nodepack.NewClients(hostCaller{host: host}, ad)
	c.AIEnvelope, c.PromptLibrary, c.AgentRuntime, c.MCP = cl.AIEnvelope, cl.PromptLibrary, cl.AgentRuntime, cl.MCP
	return c
}

// Call makes a host-service call through wophost_call: req is marshalled
// to JSON and the result unmarshalled into res (a pointer,
// *json.RawMessage for the raw bytes, or nil). A refusal is the host's
// *wop.Error.
func (c *Ctx) Call(family, method string, req, res any) error {
	return hostCaller{host: c.host}.Call(c, family, method, req, res)
}

// Advertised reports whether the host advertises family for this run.
func (c *Ctx) Advertised(family string) bool {
	_, ok := c.advertised[family]
	return ok
}

// Facet returns the advertised settings of family.facet and whether the
// facet is advertised.
func (c *Ctx) Facet(family, facet string) (json.RawMessage, bool) {
	v, ok := c.advertised[family][facet]
	return v, ok
}

// Now is the time as the host gives it (openwop_now_ms), to the
// millisecond, in UTC. The host records it, so a replay sees the same
// time; time.Now reads WASI's clock, which it does not.
func (c *Ctx) Now() time.Time {
	return time.UnixMilli(c.host.nowMs()).UTC()
}

// Random fills p with bytes from the host (openwop_random), which seeds
// them by run, node and attempt so that a replay draws the same ones.
func (c *Ctx) Random(p []byte) {
	if len(p) > 0 {
		c.host.random(p)
	}
}

// Variable returns the run variable key and whether it is set.
func (c *Ctx) Variable(key string) (json.RawMessage, bool) {
	v, ok := c.host.variableGet(key)
	return v, ok
}

// SetVariable sets the run variable key to v marshalled to JSON. The
// host's refusal is a *wop.Error with the code of its status
// (validation_error, capability_breach, ...).
func (c *Ctx) SetVariable(key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return wop.Errorf(wop.CodeValidation, "variable %q: the value does not marshal to JSON: %v", key, err)
	}
	return statusError(c.host.variableSet(key, b), "set variable", key)
}

// ReadChannel returns the value of the channel name and whether it has
// one.
func (c *Ctx) ReadChannel(name string) (json.RawMessage, bool) {
	v, ok := c.host.channelRead(name)
	return v, ok
}

// WriteChannel writes v, marshalled to JSON, to the channel name. The
// host's refusal is a *wop.Error with the code of its status
// (channel_access_denied, ...).
func (c *Ctx) WriteChannel(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return wop.Errorf(wop.CodeValidation, "channel %q: the value does not marshal to JSON: %v", name, err)
	}
	return statusError(c.host.channelWrite(name, b), "write channel", name)
}

// Interrupt suspends the node with payload, an OpenWOP InterruptPayload
// marshalled to JSON, through openwop_interrupt, and returns the value
// the run was resumed with.
func (c *Ctx) Interrupt(payload any) (json.RawMessage, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, wop.Errorf(wop.CodeValidation, "interrupt: the payload does not marshal to JSON: %v", err)
	}
	v, ok := c.host.interrupt(b)
	if !ok {
		return nil, wop.Errorf(wop.CodeInternal, "interrupt: the host returned no resume value")
	}
	return v, nil
}

// statusError is the error of an import's status: nil for ok, else a
// *wop.Error whose code the status names.
func statusError(status int32, op, name string) error {
	if status == statusOK {
		return nil
	}
	return wop.Errorf(statusCode(status), "%s %q: the host answered status %d", op, name, status)
}

// hostCaller makes host-service calls through wophost_call.
type hostCaller struct{ host imports }

var _ wop.Caller = hostCaller{}

// callAnswer is wophost_call's answer: exactly one of its members.
type callAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *wop.Error      `json:"error"`
}

// Call implements wop.Caller.
func (h hostCaller) Call(ctx context.Context, family, method string, req, res any) error {
	if err := ctx.Err(); err != nil {
		return wop.Errorf(wop.CodeCancelled, "%s.%s: %v", family, method, err)
	}
	payload, err := json.Marshal(req)
	if err != nil {
		return wop.Errorf(wop.CodeValidation, "%s.%s: the request does not marshal to JSON: %v", family, method, err)
	}
	raw := h.host.call(family, method, payload)
	var ans callAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		return wop.Errorf(wop.CodeInternal, "%s.%s: the host's answer is not a call answer: %v", family, method, err)
	}
	switch {
	case ans.Error != nil && ans.Result != nil:
		return wop.Errorf(wop.CodeInternal, "%s.%s: the host's answer has both a result and an error", family, method)
	case ans.Error != nil:
		if ans.Error.Code == "" {
			return wop.Errorf(wop.CodeInternal, "%s.%s: the host's error has no code: %s", family, method, ans.Error.Message)
		}
		return ans.Error
	case ans.Result == nil:
		return wop.Errorf(wop.CodeInternal, "%s.%s: the host's answer has neither a result nor an error", family, method)
	}
	if res == nil {
		return nil
	}
	if err := json.Unmarshal(ans.Result, res); err != nil {
		return wop.Errorf(wop.CodeInternal, "%s.%s: the result does not decode: %v", family, method, err)
	}
	return nil
}

// Logger writes to the host's log through openwop_log. keyvals are
// alternating keys and values, appended to msg as key=value; a value with
// spaces, quotes or an equals sign is quoted. The zero Logger discards.
type Logger struct{ host imports }

// Trace logs at level trace.
func (l Logger) Trace(msg string, keyvals ...any) { l.write(levelTrace, msg, keyvals) }

// Debug logs at level debug.
func (l Logger) Debug(msg string, keyvals ...any) { l.write(levelDebug, msg, keyvals) }

// Info logs at level info.
func (l Logger) Info(msg string, keyvals ...any) { l.write(levelInfo, msg, keyvals) }

// Warn logs at level warn.
func (l Logger) Warn(msg string, keyvals ...any) { l.write(levelWarn, msg, keyvals) }

// Error logs at level error.
func (l Logger) Error(msg string, keyvals ...any) { l.write(levelError, msg, keyvals) }

func (l Logger) write(level int32, msg string, keyvals []any) {
	if l.host == nil {
		return
	}
	l.host.log(level, logLine(msg, keyvals))
}

// logLine is msg followed by keyvals as key=value pairs; a key without a
// value gets "(missing)".
func logLine(msg string, keyvals []any) string {
	var b strings.Builder
	b.WriteString(msg)
	for i := 0; i < len(keyvals); i += 2 {
		b.WriteByte(' ')
		b.WriteString(fmt.Sprint(keyvals[i]))
		b.WriteByte('=')
		if i+1 >= len(keyvals) {
			b.WriteString("(missing)")
			continue
		}
		v := fmt.Sprint(keyvals[i+1])
		if v == "" || strings.ContainsAny(v, " \t\n\"=") {
			v = strconv.Quote(v)
		}
		b.WriteString(v)
	}
	return b.String()
}
