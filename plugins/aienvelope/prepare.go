package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/wophost/wophost/plugins/aienvelope/provider"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/wop"
)

// Bounds on request fields, so a request cannot make the plugin build
// something unbounded.
const (
	maxKeyBytes  = 512
	maxTypeBytes = 256
)

// prepared is a checked request, ready to run.
type prepared struct {
	req     *aienvelope.GenerateRequest
	backend *backend
	call    *provider.Request
	schema  *jsonschema.Schema // nil unless output.type is json with a schema
	digest  string
}

func invalid(format string, args ...any) *wop.Error {
	return wop.Errorf(wop.CodeValidation, format, args...)
}

// prepare checks a request, fills its variables and computes its digest.
// Problems are validation_error naming the field, except a missing
// variable, which the contract makes envelope_validation_failed.
func (in *instance) prepare(req *aienvelope.GenerateRequest) (*prepared, error) {
	switch {
	case strings.TrimSpace(req.EnvelopeType) == "":
		return nil, invalid(`field "envelopeType": must not be empty`)
	case len(req.EnvelopeType) > maxTypeBytes:
		return nil, invalid(`field "envelopeType": longer than %d bytes`, maxTypeBytes)
	case req.IdempotencyKey == "":
		return nil, invalid(`field "idempotencyKey": is required; the same key and request return the recorded envelope`)
	case len(req.IdempotencyKey) > maxKeyBytes:
		return nil, invalid(`field "idempotencyKey": longer than %d bytes`, maxKeyBytes)
	case req.Async && !in.cfg.async:
		return nil, invalid(`field "async": asynchronous generation is not enabled on this host (the await facet is not advertised)`)
	case req.UserMessage == "" && len(req.Messages) == 0:
		return nil, invalid(`fields "userMessage" and "messages": give a user message or a conversation`)
	case req.Temperature != nil && (*req.Temperature < 0 || *req.Temperature > 2):
		return nil, invalid(`field "temperature": must be between 0 and 2`)
	case req.MaxTokens != nil && *req.MaxTokens < 1:
		return nil, invalid(`field "maxTokens": must be at least 1`)
	}
	name := req.Provider
	if name == "" {
		name = in.cfg.defaultProvider
	}
	b, ok := in.cfg.backends[name]
	if !ok {
		names := make([]string, 0, len(in.cfg.backends))
		for n := range in.cfg.backends {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, invalid(`field "provider": no provider %q is configured (configured: %s)`, req.Provider, strings.Join(names, ", "))
	}
	for i, m := range req.Messages {
		if err := checkMessage(i, m); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for i, t := range req.Tools {
		switch {
		case t.Name == "":
			return nil, invalid(`field "tools[%d].name": must not be empty`, i)
		case seen[t.Name]:
			return nil, invalid(`field "tools[%d].name": %q is offered twice`, i, t.Name)
		case len(t.InputSchema) > 0 && !isJSONObject(t.InputSchema):
			return nil, invalid(`field "tools[%d].inputSchema": must be a JSON Schema object`, i)
		}
		seen[t.Name] = true
	}
	p := &prepared{req: req, backend: b}
	if o := req.Output; o != nil {
		switch o.Type {
		case aienvelope.OutputText:
			if len(o.Schema) > 0 {
				return nil, invalid(`field "output.schema": only applies to output.type "json"`)
			}
		case aienvelope.OutputJSON:
			if len(o.Schema) > 0 {
				sch, err := compileSchema(o.Schema)
				if err != nil {
					return nil, invalid(`field "output.schema": %v`, err)
				}
				p.schema = sch
			}
		default:
			return nil, invalid(`field "output.type": %q is not "text" or "json"`, o.Type)
		}
	}
	system, missing := substitute(req.SystemPrompt, req.Variables)
	user, missing2 := substitute(req.UserMessage, req.Variables)
	if missing = mergeMissing(missing, missing2); len(missing) > 0 {
		return nil, wop.Errorf(aienvelope.CodeEnvelopeValidationFailed, "variables missing for placeholders: %s", strings.Join(missing, ", ")).
			WithDetails(map[string]any{"missingVariables": missing})
	}
	msgs := slices.Clone(req.Messages)
	if user != "" {
		msgs = append(msgs, aienvelope.Message{Role: aienvelope.RoleUser, Content: user})
	}
	model := req.Model
	if model == "" {
		model = b.model
	}
	p.call = &provider.Request{System: system, Messages: msgs, Model: model, Temperature: req.Temperature,
		MaxTokens: req.MaxTokens, Stop: req.Stop, Seed: req.Seed, Output: req.Output, Tools: req.Tools}
	d, err := digest(req)
	if err != nil {
		return nil, invalid("request: %v", err)
	}
	p.digest = d
	return p, nil
}

func checkMessage(i int, m aienvelope.Message) error {
	switch m.Role {
	case aienvelope.RoleSystem, aienvelope.RoleUser:
		if len(m.ToolCalls) > 0 {
			return invalid(`field "messages[%d].toolCalls": only an assistant message carries tool calls`, i)
		}
	case aienvelope.RoleAssistant:
		for j, tc := range m.ToolCalls {
			if tc.ID == "" || tc.Name == "" {
				return invalid(`field "messages[%d].toolCalls[%d]": id and name are required`, i, j)
			}
			if len(tc.Arguments) > 0 && !isJSONObject(tc.Arguments) {
				return invalid(`field "messages[%d].toolCalls[%d].arguments": must be a JSON object`, i, j)
			}
		}
	case aienvelope.RoleTool:
		if m.ToolCallID == "" {
			return invalid(`field "messages[%d].toolCallId": a tool message must name the call it answers`, i)
		}
	default:
		return invalid(`field "messages[%d].role": %q is not system, user, assistant or tool`, i, m.Role)
	}
	return nil
}

func isJSONObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// placeholder is {{name}}, spaces allowed inside the braces.
var placeholder = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*\}\}`)

// substitute fills {{name}} from vars: strings as they are, other values
// as JSON. It returns the names with no value.
func substitute(text string, vars map[string]any) (string, []string) {
	var missing []string
	out := placeholder.ReplaceAllStringFunc(text, func(m string) string {
		name := placeholder.FindStringSubmatch(m)[1]
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		if s, ok := v.(string); ok {
			return s
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	})
	return out, missing
}

func mergeMissing(a, b []string) []string {
	all := append(a, b...)
	slices.Sort(all)
	return slices.Compact(all)
}

// digest is the sha256 of the request's canonical JSON without the
// fields that do not change what is generated (idempotencyKey, async).
// Decoding and re-encoding sorts object keys, also inside schemas and
// tool arguments, and UseNumber keeps numbers exactly as sent.
func digest(req *aienvelope.GenerateRequest) (string, error) {
	c := *req
	c.IdempotencyKey, c.Async = "", false
	b, err := json.Marshal(&c)
	if err != nil {
		return "", err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// compileSchema compiles an output schema. No loader is installed: a
// schema may only reference itself, never a file or a URL.
func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	const loc = "urn:wophost:aienvelope:output"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// result builds the envelope from a backend's answer, parsing and
// validating JSON output.
func (p *prepared) result(id string, resp *provider.Response) (json.RawMessage, *wop.Error) {
	res := aienvelope.GenerateResult{
		EnvelopeType: p.req.EnvelopeType, EnvelopeID: id, Status: aienvelope.StatusCompleted,
		Text: resp.Text, ToolCalls: resp.ToolCalls, FinishReason: resp.FinishReason, Usage: resp.Usage,
		Model: resp.Model, Provider: p.backend.name, Warnings: resp.Warnings,
	}
	if res.Model == "" {
		res.Model = p.call.Model
	}
	if res.FinishReason == "" {
		res.FinishReason = provider.FinishStop
	}
	jsonOut := p.req.Output != nil && p.req.Output.Type == aienvelope.OutputJSON
	switch {
	case jsonOut && len(resp.ToolCalls) > 0 && strings.TrimSpace(resp.Text) == "":
		// A tool-calling turn is not the final answer; there is nothing
		// to validate yet.
		res.Payload = json.RawMessage("null")
	case jsonOut:
		payload, err := parseJSONOutput(resp.Text)
		if err != nil {
			return nil, validationFailed("the output is not JSON: "+err.Error(), resp.Text, nil)
		}
		if p.schema != nil {
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
			if err == nil {
				err = p.schema.Validate(inst)
			}
			if err != nil {
				return nil, validationFailed("the output does not match output.schema", resp.Text, err)
			}
		}
		res.Payload = payload
	default:
		b, err := json.Marshal(resp.Text)
		if err != nil {
			return nil, wop.Errorf(wop.CodeInternal, "encode text: %v", err)
		}
		res.Payload = b
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, wop.Errorf(wop.CodeInternal, "encode result: %v", err)
	}
	return b, nil
}

// parseJSONOutput reads the model's JSON text, tolerating one Markdown
// code fence around it, which small local models often add.
func parseJSONOutput(text string) (json.RawMessage, error) {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "```") && strings.HasSuffix(t, "```") && len(t) >= 6 {
		t = strings.TrimSpace(strings.TrimSuffix(t[3:], "```"))
		t = strings.TrimPrefix(t, "json")
		t = strings.TrimSpace(t)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(t)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func validationFailed(msg, raw string, cause error) *wop.Error {
	d := map[string]any{"rawText": raw}
	if cause != nil {
		d["errors"] = cause.Error()
	}
	return wop.Errorf(aienvelope.CodeEnvelopeValidationFailed, "%s", msg).WithDetails(d)
}
