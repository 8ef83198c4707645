package plugintest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// AIEnvelopeConfig says how to run the aiEnvelope family checks.
type AIEnvelopeConfig struct {
	// Binary, Args, InProcess, Env and StartTimeout are as in Config.
	Binary       string
	Args         []string
	InProcess    *plugin.Plugin
	Env          []string
	StartTimeout time.Duration
	// Config is a configuration under which generate succeeds with the
	// plugin's default provider.
	Config json.RawMessage
	// AsyncConfig, when set, is a configuration that turns async on; the
	// await checks run against it in a second process. Nil skips them.
	AsyncConfig json.RawMessage
	// UserMessage is the prompt the checks send (default "Say hello.").
	UserMessage string
	// JSONSchema, when set, is an output schema the default provider is
	// expected to satisfy; the checks then ask for JSON output and
	// validate the payload's presence.
	JSONSchema json.RawMessage
}

// AIEnvelope starts cfg.Binary, configures it and checks that it serves
// aiEnvelope as docs/contract.md §4.1 requires, one subtest per rule:
//
//   - Advertised: the family is described with generate; await is
//     advertised as a facet only under AsyncConfig.
//   - Generate: a completed result with the contract's fields: the
//     envelopeType echoed, an envelopeId, status completed, a finishReason,
//     usage, model, provider, a warnings array, and payload equal to the
//     text as a JSON string.
//   - Variables: {{name}} placeholders are filled; a missing variable is
//     envelope_validation_failed.
//   - Idempotency: the same key and request answer the same envelope; the
//     same key with another request is idempotency_key_mismatch; a request
//     without a key is validation_error.
//   - AsyncRefused: without the await facet, async is refused.
//   - JSONOutput (with JSONSchema): payload is a JSON value, text its
//     encoding.
//   - Await (with AsyncConfig): async answers pending at once, await
//     returns the completed envelope with the same id, and an unknown id
//     is not_found.
func AIEnvelope(t *testing.T, cfg AIEnvelopeConfig) {
	t.Helper()
	aiEnvelopeRules(testingT{t}, cfg)
}

// aiEnvelopeRules runs AIEnvelope's checks.
func aiEnvelopeRules(t checkT, cfg AIEnvelopeConfig) {
	t.Helper()
	c := &aiEnvelopeChecks{cfg: cfg, msg: cfg.UserMessage}
	if c.msg == "" {
		c.msg = "Say hello."
	}
	c.p = start(t, Config{Binary: cfg.Binary, Args: cfg.Args, InProcess: cfg.InProcess, Config: cfg.Config, Env: cfg.Env, StartTimeout: cfg.StartTimeout})
	t.Run("Advertised", "Describe lists the aiEnvelope family with the method generate.", c.advertised)
	facets := c.p.configure(t, cfg.Config).Facets
	_, hasAwait := facets[aienvelope.Family][aienvelope.FacetAwait]

	t.Run("Generate", "generate answers a completed envelope with the contract's fields: envelopeType echoed, envelopeId, status, finishReason, usage, model, provider, warnings, and payload the text as a JSON string.", c.generate)
	t.Run("Variables", "{{name}} placeholders are filled from variables; a missing variable is envelope_validation_failed.", c.variables)
	t.Run("Idempotency", "The same idempotencyKey and request answer the same envelope; the same key with another request is idempotency_key_mismatch; no key is validation_error.", c.idempotency)
	if !hasAwait {
		t.Run("AsyncRefused", "Without the await facet, async generate is refused.", c.asyncRefused)
	}
	if len(cfg.JSONSchema) > 0 {
		t.Run("JSONOutput", "With JSON output the payload is a JSON value and the text its encoding.", c.jsonOutput)
	}
	if len(cfg.AsyncConfig) > 0 {
		t.Run("Await", "Under the async config, await is advertised, async generate answers pending, await returns the completed envelope with the same id, and an unknown id is not_found.", c.await)
	}
}

// aiEnvelopeChecks is one run of the aiEnvelope checks against the plugin
// configured with cfg.Config.
type aiEnvelopeChecks struct {
	cfg AIEnvelopeConfig
	msg string // the user message every request sends
	p   *Plugin
}

func (c *aiEnvelopeChecks) advertised(t checkT) {
	f := describedFamily(t, c.p, aienvelope.Family)
	if !slices.Contains(f.Methods, aienvelope.MethodGenerate) {
		t.Errorf("%s lacks the method %s: %v", aienvelope.Family, aienvelope.MethodGenerate, f.Methods)
	}
}

func (c *aiEnvelopeChecks) call(t checkT, method string, req any) (json.RawMessage, error) {
	t.Helper()
	return c.p.invokeJSON(t, aienvelope.Family, method, req, wop.CallContext{RunID: "plugintest", Caller: "pack:plugintest", Depth: 1, Deadline: time.Now().Add(rpcTimeout)})
}

// checkKey is an idempotency key unique to the check t and suffix.
func checkKey(t checkT, suffix string) string {
	return "plugintest-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + suffix
}

func (c *aiEnvelopeChecks) generate(t checkT) {
	req := aienvelope.GenerateRequest{EnvelopeType: "plugintest.generate", UserMessage: c.msg, IdempotencyKey: checkKey(t, "1")}
	c.generateCompleted(t, "generate", req, false)
}

// generateCompleted makes req and checks the result has the contract's
// shape; what names the call in a failure.
func (c *aiEnvelopeChecks) generateCompleted(t checkT, what string, req aienvelope.GenerateRequest, jsonOutput bool) {
	t.Helper()
	res, err := c.call(t, aienvelope.MethodGenerate, req)
	if err != nil {
		t.Fatalf("%s failed: %s", what, formatError(err))
	}
	for _, pr := range GenerateResultProblems(res, req.EnvelopeType, jsonOutput) {
		t.Error(pr)
	}
}

func (c *aiEnvelopeChecks) variables(t checkT) {
	req := aienvelope.GenerateRequest{EnvelopeType: "plugintest.vars", SystemPrompt: "You are {{persona}}.", UserMessage: c.msg + " {{suffix}}",
		Variables: map[string]any{"persona": "terse", "suffix": "Thanks."}, IdempotencyKey: checkKey(t, "ok")}
	if _, err := c.call(t, aienvelope.MethodGenerate, req); err != nil {
		t.Errorf("generate with every variable given failed: %s", formatError(err))
	}
	req.Variables = map[string]any{"persona": "terse"}
	req.IdempotencyKey = checkKey(t, "missing")
	_, err := c.call(t, aienvelope.MethodGenerate, req)
	expectCode(t, err, aienvelope.CodeEnvelopeValidationFailed, "generate with the variable suffix missing")
}

func (c *aiEnvelopeChecks) idempotency(t checkT) {
	req := aienvelope.GenerateRequest{EnvelopeType: "plugintest.idem", UserMessage: c.msg, IdempotencyKey: checkKey(t, "k")}
	first, err := c.call(t, aienvelope.MethodGenerate, req)
	if err != nil {
		t.Fatalf("generate failed: %s", formatError(err))
	}
	second, err := c.call(t, aienvelope.MethodGenerate, req)
	if err != nil {
		t.Fatalf("the same generate again failed: %s", formatError(err))
	}
	if id1, id2 := envelopeID(first), envelopeID(second); id1 == "" || id1 != id2 {
		t.Errorf("the same key and request gave envelopes %q and %q; want the recorded one", id1, id2)
	}
	if !jsonEqual(first, second) {
		t.Errorf("the same key and request gave different envelopes:\n%s\n%s", first, second)
	}
	other := req
	other.UserMessage = c.msg + " (changed)"
	_, err = c.call(t, aienvelope.MethodGenerate, other)
	expectCode(t, err, wop.CodeIdempotencyKeyMismatch, "the same key with a different request")
	nokey := req
	nokey.IdempotencyKey = ""
	_, err = c.call(t, aienvelope.MethodGenerate, nokey)
	expectCode(t, err, wop.CodeValidation, "generate without an idempotencyKey")
}

func (c *aiEnvelopeChecks) asyncRefused(t checkT) {
	req := aienvelope.GenerateRequest{EnvelopeType: "plugintest.async", UserMessage: c.msg, IdempotencyKey: checkKey(t, "a"), Async: true}
	_, err := c.call(t, aienvelope.MethodGenerate, req)
	if err == nil {
		t.Fatal("async generate succeeded although the await facet is not advertised")
	}
}

func (c *aiEnvelopeChecks) jsonOutput(t checkT) {
	req := aienvelope.GenerateRequest{EnvelopeType: "plugintest.json", UserMessage: c.msg, IdempotencyKey: checkKey(t, "j"),
		Output: &aienvelope.Output{Type: aienvelope.OutputJSON, Schema: c.cfg.JSONSchema}}
	c.generateCompleted(t, "generate with JSON output", req, true)
}

// await runs against a second process configured with AsyncConfig.
func (c *aiEnvelopeChecks) await(t checkT) {
	cfg := c.cfg
	ap := start(t, Config{Binary: cfg.Binary, Args: cfg.Args, InProcess: cfg.InProcess, Config: cfg.AsyncConfig, Env: cfg.Env, StartTimeout: cfg.StartTimeout})
	f := ap.configure(t, cfg.AsyncConfig).Facets
	// OpenWOP publishes await as the boolean true.
	if v, ok := f[aienvelope.Family][aienvelope.FacetAwait]; !ok || string(bytes.TrimSpace(v)) != "true" {
		t.Fatalf("under AsyncConfig the facets of %s are %v; want await: true", aienvelope.Family, f[aienvelope.Family])
	}
	acall := func(method string, req any) (json.RawMessage, error) {
		ctx, cancel := context.WithTimeout(t.Context(), rpcTimeout)
		defer cancel()
		b, _ := json.Marshal(req)
		return ap.Invoke(ctx, aienvelope.Family, method, b, wop.CallContext{RunID: "plugintest", Depth: 1, Deadline: time.Now().Add(rpcTimeout)})
	}
	req := aienvelope.GenerateRequest{EnvelopeType: "plugintest.await", UserMessage: c.msg, IdempotencyKey: checkKey(t, "w"), Async: true}
	raw, err := acall(aienvelope.MethodGenerate, req)
	if err != nil {
		t.Fatalf("async generate failed: %s", formatError(err))
	}
	var pending aienvelope.GenerateResult
	if err := json.Unmarshal(raw, &pending); err != nil || pending.EnvelopeID == "" ||
		(pending.Status != aienvelope.StatusPending && pending.Status != aienvelope.StatusCompleted) {
		t.Fatalf("async generate answered %s; want {envelopeType, envelopeId, status: pending}", raw)
	}
	done, err := acall(aienvelope.MethodAwait, aienvelope.AwaitRequest{EnvelopeID: pending.EnvelopeID, TimeoutMs: (rpcTimeout - 5*time.Second).Milliseconds()})
	if err != nil {
		t.Fatalf("await failed: %s", formatError(err))
	}
	for _, pr := range GenerateResultProblems(done, req.EnvelopeType, false) {
		t.Error("await: " + pr)
	}
	if id := envelopeID(done); id != pending.EnvelopeID {
		t.Errorf("await answered envelope %q; want %q", id, pending.EnvelopeID)
	}
	_, err = acall(aienvelope.MethodAwait, aienvelope.AwaitRequest{EnvelopeID: "plugintest-no-such-envelope", TimeoutMs: 0})
	expectCode(t, err, wop.CodeNotFound, "await of an unknown envelopeId")
}

func envelopeID(raw json.RawMessage) string {
	var r struct {
		EnvelopeID string `json:"envelopeId"`
	}
	_ = json.Unmarshal(raw, &r)
	return r.EnvelopeID
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return false
	}
	return x.String() == y.String()
}

// GenerateResultProblems lists how raw, a completed generate or await
// answer, departs from the contract's result shape. envelopeType is what
// the request sent; jsonOutput says the request asked for JSON output.
func GenerateResultProblems(raw json.RawMessage, envelopeType string, jsonOutput bool) []string {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return []string{fmt.Sprintf("the result is not a JSON object: %s", raw)}
	}
	var out []string
	for _, f := range []string{"envelopeType", "envelopeId", "status", "payload", "text", "finishReason", "usage", "model", "provider", "warnings"} {
		if _, ok := fields[f]; !ok {
			out = append(out, fmt.Sprintf("the result lacks %q: %s", f, raw))
		}
	}
	if len(out) > 0 {
		return out
	}
	var r aienvelope.GenerateResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return []string{fmt.Sprintf("the result does not decode as a GenerateResult: %v: %s", err, raw)}
	}
	if r.EnvelopeType != envelopeType {
		out = append(out, fmt.Sprintf("envelopeType is %q; want the request's %q", r.EnvelopeType, envelopeType))
	}
	if r.EnvelopeID == "" {
		out = append(out, "envelopeId is empty")
	}
	if r.Status != aienvelope.StatusCompleted {
		out = append(out, fmt.Sprintf("status is %q; want %q", r.Status, aienvelope.StatusCompleted))
	}
	if r.FinishReason == "" {
		out = append(out, "finishReason is empty")
	}
	if r.Model == "" || r.Provider == "" {
		out = append(out, fmt.Sprintf("model %q and provider %q must both be named", r.Model, r.Provider))
	}
	if w := bytes.TrimSpace(fields["warnings"]); len(w) == 0 || w[0] != '[' {
		out = append(out, fmt.Sprintf("warnings is %s; want an array (empty when there are none)", fields["warnings"]))
	}
	if r.Usage.InputTokens < 0 || r.Usage.OutputTokens < 0 {
		out = append(out, fmt.Sprintf("usage %+v has negative counts", r.Usage))
	}
	switch {
	case jsonOutput:
		if len(r.ToolCalls) == 0 && !jsonEqual(r.Payload, json.RawMessage(r.Text)) {
			out = append(out, fmt.Sprintf("with JSON output, payload %s must be the parsed text %q", r.Payload, r.Text))
		}
	default:
		want, _ := json.Marshal(r.Text)
		if !jsonEqual(r.Payload, want) {
			out = append(out, fmt.Sprintf("with text output, payload %s must be the text as a JSON string %s", r.Payload, want))
		}
	}
	return out
}
