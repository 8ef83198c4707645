package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/wop"
)

// errDeclined marks an input request the policy does not fulfil.
var errDeclined = errors.New("declined by host policy")

// callerKey carries the host caller of the pack call being served, so
// that the input requests made during it are answered as part of it.
type callerKey struct{}

// withCaller returns ctx for serving one pack call through host.
func withCaller(ctx context.Context, host wop.Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, host)
}

func callerOf(ctx context.Context) wop.Caller {
	c, _ := ctx.Value(callerKey{}).(wop.Caller)
	return c
}

// advertisedProbe is a method no family has. The host checks that a
// callback's family is declared and advertised before it looks for the
// method, so calling it on aiEnvelope answers capability_not_provided when
// aiEnvelope is not advertised and not_found when it is, and never reaches
// the plugin that serves aiEnvelope.
const advertisedProbe = "mcp.samplingProbe"

// aiEnvelopeRecheck is how long the host's answer on aiEnvelope is kept:
// asking on every request would add a host round trip to every MCP call,
// while the advertisement changes only when a plugin stops, restarts or is
// reloaded.
const aiEnvelopeRecheck = time.Second

// aiEnvelopeWatch knows whether the host advertises aiEnvelope, which
// answers sampling requests: asked of the host at most once per recheck,
// and taken as withdrawn as soon as a sampling request finds it so.
type aiEnvelopeWatch struct {
	recheck time.Duration

	mu         sync.Mutex
	checkedAt  time.Time
	advertised bool
}

func newAIEnvelopeWatch() *aiEnvelopeWatch {
	return &aiEnvelopeWatch{recheck: aiEnvelopeRecheck}
}

// canSample reports whether a sampling request made in ctx could be
// answered. Only a call within a node run can reach the host; outside
// one, nothing could answer it.
func (w *aiEnvelopeWatch) canSample(ctx context.Context) bool {
	host := callerOf(ctx)
	if w == nil || host == nil {
		return false
	}
	if cc, ok := wop.CallContextFrom(ctx); !ok || cc.RunID == "" {
		return false
	}
	w.mu.Lock()
	fresh, advertised := time.Since(w.checkedAt) < w.recheck, w.advertised
	w.mu.Unlock()
	if fresh {
		return advertised
	}
	// Not under the lock: a slow answer must not hold other calls, and
	// two calls asking at once is harmless.
	err := host.Call(ctx, aienvelope.Family, advertisedProbe, struct{}{}, nil)
	code := wop.CodeOf(err)
	switch code {
	case wop.CodeNotFound, wop.CodeCapabilityNotProvided:
		w.set(code == wop.CodeNotFound)
		return code == wop.CodeNotFound
	}
	// No answer on the advertisement (the host unreachable, the call's
	// deadline): do not claim what may not be there, and ask again next
	// time.
	return false
}

// withdrawn records that aiEnvelope is not advertised any more.
func (w *aiEnvelopeWatch) withdrawn() {
	if w != nil {
		w.set(false)
	}
}

func (w *aiEnvelopeWatch) set(advertised bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checkedAt, w.advertised = time.Now(), advertised
}

// policy answers a server's input requests: elicitation by the configured
// policy, sampling through the host's aiEnvelope, roots from config.
type policy struct {
	server *serverConfig
	// ai tells whether aiEnvelope is there to answer sampling; shared by
	// every server of the plugin.
	ai     *aiEnvelopeWatch
	logger hclog.Logger
}

// Capabilities declares elicitation (a decline is an answer) always,
// sampling only when the host advertises aiEnvelope to answer it, and
// roots only when some are configured. Every request a server gets
// carries them, so the four objects are written out rather than encoded
// each time; their keys are in the order json.Marshal would give.
func (p *policy) Capabilities(ctx context.Context) json.RawMessage {
	roots, sampling := len(p.server.roots) > 0, p.ai.canSample(ctx)
	switch {
	case roots && sampling:
		return json.RawMessage(`{"elicitation":{},"roots":{},"sampling":{}}`)
	case roots:
		return json.RawMessage(`{"elicitation":{},"roots":{}}`)
	case sampling:
		return json.RawMessage(`{"elicitation":{},"sampling":{}}`)
	}
	return json.RawMessage(`{"elicitation":{}}`)
}

// Answer implements client.InputAnswerer.
func (p *policy) Answer(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	switch method {
	case "elicitation/create":
		return p.elicit(params), nil
	case "sampling/createMessage":
		return p.sample(ctx, params)
	case "roots/list":
		if len(p.server.roots) == 0 {
			return nil, errDeclined
		}
		return json.Marshal(map[string]any{"roots": p.server.roots})
	}
	return nil, fmt.Errorf("%w: unknown input request %q", errDeclined, method)
}

var decline = json.RawMessage(`{"action":"decline"}`)

// elicit answers a form elicitation: declined, or accepted with the
// schema's defaults and (policy fixed) the configured answers. When a
// required property has no value the request is declined, never answered
// with made-up data. URL elicitation is always declined.
func (p *policy) elicit(params json.RawMessage) json.RawMessage {
	if p.server.policy == policyDecline {
		return decline
	}
	var req struct {
		Mode            string `json:"mode"`
		RequestedSchema struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		} `json:"requestedSchema"`
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil || (req.Mode != "" && req.Mode != "form") {
		return decline
	}
	content := map[string]any{}
	for name, raw := range req.RequestedSchema.Properties {
		var prop struct {
			Type    any             `json:"type"`
			Default json.RawMessage `json:"default"`
			Items   *struct {
				Type string `json:"type"`
			} `json:"items"`
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if d.Decode(&prop) != nil {
			return decline
		}
		typ, _ := prop.Type.(string)
		if p.server.policy == policyFixed {
			if text, ok := p.server.answers[name]; ok {
				v, err := convertAnswer(typ, text)
				if err != nil {
					p.logger.Warn("fixed elicitation answer does not fit the requested type; declined", "property", name, "error", err)
					return decline
				}
				content[name] = v
				continue
			}
		}
		if len(prop.Default) > 0 {
			content[name] = prop.Default
		}
	}
	for _, name := range req.RequestedSchema.Required {
		if _, ok := content[name]; !ok {
			return decline
		}
	}
	b, err := json.Marshal(map[string]any{"action": "accept", "content": content})
	if err != nil {
		return decline
	}
	return b
}

// convertAnswer turns a configured answer into the property's type.
func convertAnswer(typ, text string) (any, error) {
	switch typ {
	case "boolean":
		return strconv.ParseBool(text)
	case "integer":
		if _, err := strconv.ParseInt(text, 10, 64); err != nil {
			return nil, fmt.Errorf("%q is not an integer", text)
		}
		return json.Number(text), nil
	case "number":
		if _, err := strconv.ParseFloat(text, 64); err != nil {
			return nil, fmt.Errorf("%q is not a number", text)
		}
		return json.Number(text), nil
	case "array":
		parts := strings.Split(text, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return parts, nil
	}
	return text, nil
}

// sample answers sampling/createMessage with the host's aiEnvelope, as
// part of the pack call the request came in. Outside a call, or when the
// host refuses (aiEnvelope is not advertised), it is declined.
func (p *policy) sample(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	caller := callerOf(ctx)
	if caller == nil {
		return nil, errDeclined
	}
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		SystemPrompt  string   `json:"systemPrompt"`
		MaxTokens     *int     `json:"maxTokens"`
		Temperature   *float64 `json:"temperature"`
		StopSequences []string `json:"stopSequences"`
	}
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, fmt.Errorf("%w: malformed sampling request: %v", errDeclined, err)
	}
	gen := aienvelope.GenerateRequest{
		EnvelopeType: "mcp.sampling",
		SystemPrompt: req.SystemPrompt,
		MaxTokens:    req.MaxTokens,
		Temperature:  req.Temperature,
		Stop:         req.StopSequences,
	}
	for _, m := range req.Messages {
		text, err := samplingText(m.Content)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errDeclined, err)
		}
		gen.Messages = append(gen.Messages, aienvelope.Message{Role: m.Role, Content: text})
	}
	// The same question from the same server maps to the same envelope,
	// so a replayed run does not ask the provider twice.
	sum := sha256.Sum256(append([]byte(p.server.id+"\x00"), params...))
	gen.IdempotencyKey = "mcp-sampling-" + hex.EncodeToString(sum[:16])
	var res aienvelope.GenerateResult
	if err := caller.Call(ctx, aienvelope.Family, aienvelope.MethodGenerate, &gen, &res); err != nil {
		if wop.CodeOf(err) == wop.CodeCapabilityNotProvided {
			p.ai.withdrawn()
		}
		p.logger.Debug("sampling request declined: aiEnvelope refused", "error", err)
		return nil, fmt.Errorf("%w: %v", errDeclined, err)
	}
	return json.Marshal(map[string]any{
		"role":       "assistant",
		"content":    map[string]string{"type": "text", "text": res.Text},
		"model":      res.Model,
		"stopReason": stopReason(res.FinishReason),
	})
}

// samplingText flattens a sampling message's text content; other content
// types cannot be passed to aiEnvelope.
func samplingText(content json.RawMessage) (string, error) {
	type block struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	var blocks []block
	if t := bytes.TrimSpace(content); len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &blocks); err != nil {
			return "", fmt.Errorf("malformed content: %w", err)
		}
	} else {
		var b block
		if err := json.Unmarshal(t, &b); err != nil {
			return "", fmt.Errorf("malformed content: %w", err)
		}
		blocks = []block{b}
	}
	var sb strings.Builder
	for _, b := range blocks {
		if b.Type != "text" {
			return "", fmt.Errorf("content of type %q is not supported", b.Type)
		}
		sb.WriteString(b.Text)
	}
	return sb.String(), nil
}

// stopReason maps an aiEnvelope finish reason to MCP's spelling.
func stopReason(finish string) string {
	switch finish {
	case "stop", "end_turn", "endTurn", "":
		return "endTurn"
	case "length", "max_tokens", "maxTokens":
		return "maxTokens"
	case "stop_sequence", "stopSequence":
		return "stopSequence"
	}
	return finish
}
