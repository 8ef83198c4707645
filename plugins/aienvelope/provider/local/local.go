// Package local is the aiEnvelope plugin's offline backend. It is not a
// language model and says so: it answers from an ordered list of rules
// (a pattern on the conversation → a fixed text, JSON value or tool
// calls), otherwise from a fixed template over the prompt, and for JSON
// output without a rule it builds a deterministic instance of the
// requested schema. The same request always gets the same answer, which
// makes it the zero-setup default and a script for agent-loop tests.
package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/wophost/wophost/plugins/aienvelope/provider"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/wop"
)

// DefaultModel is the model name the local backend reports: it names what
// answered, a rule table, not a model.
const DefaultModel = "local-rules"

// Where a rule looks.
const (
	// OnUser matches the last user message (the default).
	OnUser = "user"
	// OnTool matches only when the last message is a tool result, against
	// its content: the hook for "answer once the tool has replied".
	OnTool = "tool"
	// OnSystem matches the system prompt.
	OnSystem = "system"
	// OnLast matches the last message, whatever its role.
	OnLast = "last"
)

// RuleFile is the rules document: {"rules": [...]}.
type RuleFile struct {
	Rules []Rule `json:"rules"`
}

// Rule is one pattern and its answer. Rules are tried in order and the
// first match answers. A rule with neither Match nor Contains matches
// whenever its On target exists.
type Rule struct {
	// On is where to look: "user" (default), "tool", "system" or "last".
	On string `json:"on,omitempty"`
	// Match is an RE2 regular expression; Contains a plain substring.
	// When both are set, both must match.
	Match    string `json:"match,omitempty"`
	Contains string `json:"contains,omitempty"`
	// Exactly one answer: Text, JSON or ToolCalls.
	Text      *string         `json:"text,omitempty"`
	JSON      json.RawMessage `json:"json,omitempty"`
	ToolCalls []RuleToolCall  `json:"toolCalls,omitempty"`

	re *regexp.Regexp // compiled Match
}

// RuleToolCall is a tool call a rule answers with. The id is derived from
// the request, so it is stable across runs.
type RuleToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Provider is a configured local backend.
type Provider struct {
	model string
	rules []Rule
}

// Parse reads and checks a rules document. Errors name the rule index and
// field.
func Parse(data []byte) ([]Rule, error) {
	var f RuleFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	for i := range f.Rules {
		r := &f.Rules[i]
		switch r.On {
		case "":
			r.On = OnUser
		case OnUser, OnTool, OnSystem, OnLast:
		default:
			return nil, fmt.Errorf("rules[%d].on: %q is not user, tool, system or last", i, r.On)
		}
		if r.Match != "" {
			re, err := regexp.Compile(r.Match)
			if err != nil {
				return nil, fmt.Errorf("rules[%d].match: %w", i, err)
			}
			r.re = re
		}
		answers := 0
		if r.Text != nil {
			answers++
		}
		if len(r.JSON) > 0 {
			answers++
			if !json.Valid(r.JSON) {
				return nil, fmt.Errorf("rules[%d].json: not valid JSON", i)
			}
		}
		if len(r.ToolCalls) > 0 {
			answers++
			for j, tc := range r.ToolCalls {
				if tc.Name == "" {
					return nil, fmt.Errorf("rules[%d].toolCalls[%d].name: must not be empty", i, j)
				}
				if len(tc.Arguments) > 0 && !isObject(tc.Arguments) {
					return nil, fmt.Errorf("rules[%d].toolCalls[%d].arguments: must be a JSON object", i, j)
				}
			}
		}
		if answers != 1 {
			return nil, fmt.Errorf("rules[%d]: give exactly one of text, json or toolCalls", i)
		}
	}
	return f.Rules, nil
}

// New returns a local backend over rules (which Parse checked). An empty
// model means DefaultModel.
func New(model string, rules []Rule) *Provider {
	if model == "" {
		model = DefaultModel
	}
	return &Provider{model: model, rules: rules}
}

// Generate answers from the first matching rule, else from the template
// or, for JSON output, a schema instance. It never fails for lack of a
// rule; it fails only when the answer cannot be built.
func (p *Provider) Generate(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	resp := &provider.Response{Model: p.model, FinishReason: provider.FinishStop}
	if req.Model != "" {
		resp.Model = req.Model
	}
	if req.Temperature != nil {
		resp.Warnings = append(resp.Warnings, provider.Ignored("temperature", "local"))
	}
	if req.Seed != nil {
		resp.Warnings = append(resp.Warnings, provider.Ignored("seed", "local"))
	}
	if len(req.Stop) > 0 {
		resp.Warnings = append(resp.Warnings, provider.Ignored("stop", "local"))
	}
	if req.MaxTokens != nil {
		resp.Warnings = append(resp.Warnings, provider.Ignored("maxTokens", "local"))
	}
	jsonOut := req.Output != nil && req.Output.Type == aienvelope.OutputJSON
	rule := p.match(req)
	switch {
	case rule != nil && len(rule.ToolCalls) > 0:
		digest := requestDigest(req)
		for i, tc := range rule.ToolCalls {
			args := tc.Arguments
			if len(args) == 0 {
				args = json.RawMessage(`{}`)
			}
			resp.ToolCalls = append(resp.ToolCalls, aienvelope.ToolCall{
				ID: fmt.Sprintf("call_%s_%d", digest[:12], i), Name: tc.Name, Arguments: args,
			})
		}
		resp.FinishReason = provider.FinishToolCalls
	case rule != nil && rule.Text != nil:
		resp.Text = *rule.Text
	case rule != nil:
		resp.Text = provider.JSONText(rule.JSON)
	case jsonOut:
		var schema any
		if len(req.Output.Schema) > 0 {
			if err := json.Unmarshal(req.Output.Schema, &schema); err != nil {
				return nil, &provider.Error{Code: wop.CodeValidation, Message: "output.schema: " + err.Error()}
			}
		}
		v, err := Instance(schema)
		if err != nil {
			return nil, &provider.Error{Code: aienvelope.CodeEnvelopeValidationFailed, Message: "the local provider cannot build an instance of output.schema: " + err.Error()}
		}
		b, err := marshal(v)
		if err != nil {
			return nil, err
		}
		resp.Text = string(b)
	default:
		resp.Text = template(req)
	}
	resp.Usage = aienvelope.Usage{InputTokens: promptTokens(req), OutputTokens: estimateTokens(resp.Text) + toolTokens(resp.ToolCalls)}
	return resp, nil
}

func (p *Provider) match(req *provider.Request) *Rule {
	for i := range p.rules {
		r := &p.rules[i]
		target, ok := targetOf(r.On, req)
		if !ok {
			continue
		}
		if r.re != nil && !r.re.MatchString(target) {
			continue
		}
		if r.Contains != "" && !strings.Contains(target, r.Contains) {
			continue
		}
		return r
	}
	return nil
}

func targetOf(on string, req *provider.Request) (string, bool) {
	switch on {
	case OnSystem:
		return req.System, req.System != ""
	case OnLast:
		if n := len(req.Messages); n > 0 {
			return req.Messages[n-1].Content, true
		}
	case OnTool:
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == aienvelope.RoleTool {
			return req.Messages[n-1].Content, true
		}
	default:
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if req.Messages[i].Role == aienvelope.RoleUser {
				return req.Messages[i].Content, true
			}
		}
	}
	return "", false
}

// template is the answer when no rule matched: it states what it is and
// echoes what it saw, so nobody mistakes it for a model's reply.
func template(req *provider.Request) string {
	last, _ := targetOf(OnUser, req)
	return fmt.Sprintf("[local-rules] No rule matched. This answer comes from the local provider, not a language model. Last user message: %q", truncate(last, 200))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// requestDigest identifies a request, for stable tool-call ids.
func requestDigest(req *provider.Request) string {
	b, _ := json.Marshal(req)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// estimateTokens is a deterministic stand-in for a tokenizer: about four
// bytes per token, rounded up.
func estimateTokens(s string) int { return (len(s) + 3) / 4 }

func promptTokens(req *provider.Request) int {
	n := estimateTokens(req.System)
	for _, m := range req.Messages {
		n += estimateTokens(m.Content)
	}
	return n
}

func toolTokens(calls []aienvelope.ToolCall) int {
	n := 0
	for _, c := range calls {
		n += estimateTokens(c.Name) + estimateTokens(string(c.Arguments))
	}
	return n
}

func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
