package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/wop"
)

// familyAIEnvelope is BADPLUGIN_FAMILY's value that makes the plugin serve
// aiEnvelope instead of test.bad. Its rules to break:
//
//   - ai-advertised: generate is missing from the described methods.
//   - ai-shape: a synchronous generate of text answers without a
//     finishReason.
//   - ai-variables: a missing variable is left in place, not refused.
//   - ai-idempotency: a repeat under the same key is a new envelope.
//   - ai-async-refused: async is accepted without the await facet.
//   - ai-await: await of an unknown envelopeId is internal, not not_found.
//   - ai-await-facet: under {"async": true} the await facet is {}, not
//     the boolean true, a record the host refuses to advertise.
const familyAIEnvelope = "aiEnvelope"

// envelope is what the aiEnvelope mode keeps of a key: the request it
// answered (without key and async) and its result.
type envelope struct {
	request string
	result  aienvelope.GenerateResult
}

var placeholder = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_]+)\s*\}\}`)

// fill replaces the {{name}} placeholders of text from vars.
func fill(text string, vars map[string]any, strict bool) (string, error) {
	var missing string
	out := placeholder.ReplaceAllStringFunc(text, func(m string) string {
		name := placeholder.FindStringSubmatch(m)[1]
		v, ok := vars[name]
		if !ok {
			if missing == "" {
				missing = name
			}
			return m
		}
		return fmt.Sprint(v)
	})
	if missing != "" && strict {
		return "", wop.Errorf(aienvelope.CodeEnvelopeValidationFailed, "the variable %s is missing", missing)
	}
	return out, nil
}

// aiDescribeMethods lists the methods the aiEnvelope mode describes.
func (s *server) aiDescribeMethods() []string {
	methods := []string{aienvelope.MethodGenerate, aienvelope.MethodAwait}
	if s.breaks("ai-advertised") {
		methods = methods[1:]
	}
	return methods
}

// aiFacets are the facets the aiEnvelope mode advertises under config:
// await when config is {"async": true}.
func (s *server) aiFacets(config []byte) []byte {
	var c struct {
		Async bool `json:"async"`
	}
	_ = json.Unmarshal(config, &c)
	if c.Async && s.breaks("ai-await-facet") {
		return []byte(`{"await":{}}`)
	}
	if c.Async {
		return []byte(`{"await":true}`)
	}
	return []byte(`{}`)
}

// aiInvoke serves the aiEnvelope family; the caller holds no lock.
func (s *server) aiInvoke(method string, payload []byte) ([]byte, error) {
	switch method {
	case aienvelope.MethodGenerate:
		var req aienvelope.GenerateRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, wop.Errorf(wop.CodeValidation, "generate: %v", err)
		}
		res, err := s.aiGenerate(req)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	case aienvelope.MethodAwait:
		var req aienvelope.AwaitRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, wop.Errorf(wop.CodeValidation, "await: %v", err)
		}
		s.mu.Lock()
		res, ok := s.byID[req.EnvelopeID]
		s.mu.Unlock()
		if !ok {
			if s.breaks("ai-await") {
				return nil, wop.Errorf(wop.CodeInternal, "lost track of %s", req.EnvelopeID)
			}
			return nil, wop.Errorf(wop.CodeNotFound, "no envelope %s", req.EnvelopeID)
		}
		return json.Marshal(res)
	}
	return nil, wop.Errorf(wop.CodeNotFound, "no method %s", method).WithCapability("host." + aienvelope.Family + "." + method)
}

func (s *server) aiGenerate(req aienvelope.GenerateRequest) (aienvelope.GenerateResult, error) {
	if req.IdempotencyKey == "" {
		return aienvelope.GenerateResult{}, wop.Errorf(wop.CodeValidation, "generate needs an idempotencyKey")
	}
	if req.Async && !s.await && !s.breaks("ai-async-refused") {
		return aienvelope.GenerateResult{}, wop.Errorf(wop.CodeValidation, "async needs the await facet")
	}
	strict := !s.breaks("ai-variables")
	system, err := fill(req.SystemPrompt, req.Variables, strict)
	if err != nil {
		return aienvelope.GenerateResult{}, err
	}
	user, err := fill(req.UserMessage, req.Variables, strict)
	if err != nil {
		return aienvelope.GenerateResult{}, err
	}
	key, async := req.IdempotencyKey, req.Async
	req.IdempotencyKey, req.Async = "", false
	canon, _ := json.Marshal(req)

	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.keys[key]; ok {
		if prev.request != string(canon) {
			return aienvelope.GenerateResult{}, wop.Errorf(wop.CodeIdempotencyKeyMismatch, "the key %s was used for another request", key)
		}
		if !s.breaks("ai-idempotency") {
			return prev.result, nil
		}
	}
	s.next++
	text := strings.TrimSpace(system + " " + user)
	payload, _ := json.Marshal(text)
	res := aienvelope.GenerateResult{
		EnvelopeType: req.EnvelopeType, EnvelopeID: fmt.Sprintf("env-%d", s.next), Status: aienvelope.StatusCompleted,
		Payload: payload, Text: text, FinishReason: "stop",
		Usage: aienvelope.Usage{InputTokens: len(text), OutputTokens: len(text)}, Model: "echo", Provider: "badplugin",
	}
	if req.Output != nil && req.Output.Type == aienvelope.OutputJSON {
		res.Text, res.Payload = `{}`, json.RawMessage(`{}`)
	}
	if s.breaks("ai-shape") && req.Output == nil && !async {
		res.FinishReason = ""
	}
	s.byID[res.EnvelopeID] = res
	s.keys[key] = envelope{request: string(canon), result: res}
	if async {
		return aienvelope.GenerateResult{EnvelopeType: res.EnvelopeType, EnvelopeID: res.EnvelopeID, Status: aienvelope.StatusPending}, nil
	}
	return res, nil
}
