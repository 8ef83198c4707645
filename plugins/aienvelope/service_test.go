package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/plugins/aienvelope/internal/wiretest"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// sleeps records the retry policy's waits instead of sleeping.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) get() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// harness is a configured service over a state directory.
type harness struct {
	svc    *service
	sleeps *sleeps
	dir    string
}

func configured(t *testing.T, dir, config string) *harness {
	t.Helper()
	h, err := tryConfigure(t, dir, config)
	if err != nil {
		t.Fatalf("configure: %v", err)
	}
	return h
}

func tryConfigure(t *testing.T, dir, config string) (*harness, error) {
	t.Helper()
	return tryConfigureWith(t, dir, config, nil)
}

// tryConfigureWith is tryConfigure with adjust applied to the service
// before it is configured.
func tryConfigureWith(t *testing.T, dir, config string, adjust func(*service)) (*harness, error) {
	t.Helper()
	sl := &sleeps{}
	svc := &service{logger: hclog.NewNullLogger(), sleep: sl.sleep, rand: func() float64 { return 0.5 }}
	if adjust != nil {
		adjust(svc)
	}
	// The SDK holds a config to the schema's constraints before
	// Configure, as the host does before that.
	if err := plugin.CheckConfig(configSchema(), json.RawMessage(config)); err != nil {
		return nil, err
	}
	if err := svc.configure(context.Background(), &plugin.ConfigureRequest{Config: json.RawMessage(config), StateDir: dir}); err != nil {
		return nil, err
	}
	t.Cleanup(svc.shutdown)
	return &harness{svc: svc, sleeps: sl, dir: dir}, nil
}

func (h *harness) generate(t *testing.T, req string) (aienvelope.GenerateResult, *wop.Error) {
	t.Helper()
	return h.generateCtx(t, context.Background(), req)
}

func (h *harness) generateCtx(t *testing.T, ctx context.Context, req string) (aienvelope.GenerateResult, *wop.Error) {
	t.Helper()
	var in aienvelope.GenerateRequest
	if err := json.Unmarshal([]byte(req), &in); err != nil {
		t.Fatal(err)
	}
	out, err := h.svc.Generate(ctx, nil, &in)
	return decodeResult(t, out, err)
}

func (h *harness) await(t *testing.T, id string, timeoutMs int64) (aienvelope.GenerateResult, *wop.Error) {
	t.Helper()
	out, err := h.svc.Await(context.Background(), nil, &aienvelope.AwaitRequest{EnvelopeID: id, TimeoutMs: timeoutMs})
	return decodeResult(t, out, err)
}

// sent decodes out as the caller receives it: marshalled, which sends a
// replay's Raw as stored.
func sent(out *aienvelope.GenerateResult, res *aienvelope.GenerateResult) error {
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, res)
}

func decodeResult(t *testing.T, out *aienvelope.GenerateResult, err error) (aienvelope.GenerateResult, *wop.Error) {
	t.Helper()
	var res aienvelope.GenerateResult
	if err != nil {
		var we *wop.Error
		if !errors.As(err, &we) {
			t.Fatalf("error %v (%T) is not a *wop.Error", err, err)
		}
		return res, we
	}
	if err := sent(out, &res); err != nil {
		t.Fatalf("result %+v: %v", out, err)
	}
	return res, nil
}

func (h *harness) mustGenerate(t *testing.T, req string) aienvelope.GenerateResult {
	t.Helper()
	res, err := h.generate(t, req)
	if err != nil {
		t.Fatalf("generate %s: %+v", req, err)
	}
	return res
}

func (h *harness) mustAwait(t *testing.T, id string, timeoutMs int64) aienvelope.GenerateResult {
	t.Helper()
	res, err := h.await(t, id, timeoutMs)
	if err != nil {
		t.Fatalf("await %s: %+v", id, err)
	}
	return res
}

func wantCode(t *testing.T, err *wop.Error, code, mention string) {
	t.Helper()
	if err == nil {
		t.Fatalf("succeeded; want %s", code)
	}
	if err.Code != code || !strings.Contains(err.Message, mention) {
		t.Fatalf("got %s: %s; want %s mentioning %q", err.Code, err.Message, code, mention)
	}
}

const rulesConfig = `{"provider":{"local":{"type":"local","rules":%q}}}`

const agentRules = `{"rules":[
  {"on":"tool","text":"Done: the tool said so."},
  {"match":"(?i)weather","toolCalls":[{"name":"get_weather","arguments":{"city":"Paris"}}]},
  {"contains":"bad verdict","json":{"verdict":"maybe"}}
]}`

func TestLocalDefaultsWithoutConfig(t *testing.T) {
	h := configured(t, t.TempDir(), `{}`)
	if f := h.svc.facets(); f != nil {
		t.Errorf("facets %v without async", f)
	}
	res := h.mustGenerate(t, `{"envelopeType":"greeting","userMessage":"Hi {{name}}!","variables":{"name":"Ada"},"temperature":0.3,"idempotencyKey":"k1"}`)
	if res.Status != "completed" || res.Provider != "local" || res.Model != "local-rules" || res.FinishReason != "stop" ||
		!strings.Contains(res.Text, `"Hi Ada!"`) || string(res.Payload) != mustJSON(res.Text) || res.Usage.InputTokens == 0 ||
		!strings.HasPrefix(res.EnvelopeID, "env_") || res.EnvelopeType != "greeting" {
		t.Errorf("result %+v", res)
	}
	if len(res.Warnings) != 1 || res.Warnings[0].Code != "unsupported_setting" {
		t.Errorf("warnings %+v", res.Warnings)
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestValidation(t *testing.T) {
	h := configured(t, t.TempDir(), fmt.Sprintf(rulesConfig, agentRules))
	tests := []struct{ req, code, mention string }{
		{`{"userMessage":"x","idempotencyKey":"k"}`, "validation_error", `"envelopeType"`},
		{`{"envelopeType":"t","userMessage":"x"}`, "validation_error", `"idempotencyKey"`},
		{`{"envelopeType":"t","idempotencyKey":"k"}`, "validation_error", `"userMessage"`},
		{`{"envelopeType":"t","userMessage":"x","idempotencyKey":"k","provider":"nope"}`, "validation_error", `"provider": no provider "nope"`},
		{`{"envelopeType":"t","userMessage":"x","idempotencyKey":"k","async":true}`, "validation_error", `"async"`},
		{`{"envelopeType":"t","userMessage":"x","idempotencyKey":"k","output":{"type":"yaml"}}`, "validation_error", `"output.type"`},
		{`{"envelopeType":"t","userMessage":"x","idempotencyKey":"k","output":{"type":"json","schema":{"type":7}}}`, "validation_error", `"output.schema"`},
		{`{"envelopeType":"t","messages":[{"role":"robot","content":"x"}],"idempotencyKey":"k"}`, "validation_error", `"messages[0].role"`},
		{`{"envelopeType":"t","messages":[{"role":"tool","content":"x"}],"idempotencyKey":"k"}`, "validation_error", `"messages[0].toolCallId"`},
		{`{"envelopeType":"t","userMessage":"x","idempotencyKey":"k","tools":[{"name":"a"},{"name":"a"}]}`, "validation_error", `"tools[1].name"`},
		{`{"envelopeType":"t","userMessage":"x","idempotencyKey":"k","maxTokens":0}`, "validation_error", `"maxTokens"`},
		{`{"envelopeType":"t","systemPrompt":"{{who}} and {{ what }}","userMessage":"{{who}}","idempotencyKey":"k"}`, "envelope_validation_failed", "what, who"},
	}
	for _, tt := range tests {
		_, err := h.generate(t, tt.req)
		wantCode(t, err, tt.code, tt.mention)
	}
}

func TestAgentLoopAndJSONOutput(t *testing.T) {
	h := configured(t, t.TempDir(), fmt.Sprintf(rulesConfig, agentRules))
	first := h.mustGenerate(t, `{"envelopeType":"turn","userMessage":"weather in Paris?","tools":[{"name":"get_weather","description":"w","inputSchema":{"type":"object"}}],"idempotencyKey":"t1"}`)
	if first.FinishReason != "tool_calls" || len(first.ToolCalls) != 1 || first.ToolCalls[0].Name != "get_weather" {
		t.Fatalf("first %+v", first)
	}
	tc, _ := json.Marshal(first.ToolCalls[0])
	second := h.mustGenerate(t, `{"envelopeType":"turn","messages":[{"role":"user","content":"weather in Paris?"},`+
		`{"role":"assistant","content":"","toolCalls":[`+string(tc)+`]},{"role":"tool","toolCallId":"`+first.ToolCalls[0].ID+`","content":"18C"}],"idempotencyKey":"t2"}`)
	if second.Text != "Done: the tool said so." || second.FinishReason != "stop" {
		t.Fatalf("second %+v", second)
	}

	schema := `{"type":"object","required":["verdict","score"],"properties":{"verdict":{"enum":["approve","reject"]},"score":{"type":"integer","minimum":1}}}`
	js := h.mustGenerate(t, `{"envelopeType":"verdict","userMessage":"judge","output":{"type":"json","schema":`+schema+`},"idempotencyKey":"j1"}`)
	if string(js.Payload) != `{"score":1,"verdict":"approve"}` || js.Text != string(js.Payload) {
		t.Errorf("generated instance %s / %q", js.Payload, js.Text)
	}
	_, err := h.generate(t, `{"envelopeType":"verdict","userMessage":"a bad verdict","output":{"type":"json","schema":`+schema+`},"idempotencyKey":"j2"}`)
	wantCode(t, err, "envelope_validation_failed", "output.schema")
	var d struct{ RawText, Errors string }
	if json.Unmarshal(err.Details, &d); d.RawText != `{"verdict":"maybe"}` || d.Errors == "" {
		t.Errorf("details %s", err.Details)
	}
}

func openaiConfig(url string, extra string) string {
	return `{"default_provider":"remote","retry":{"max_attempts":3,"initial_backoff":"10ms","max_backoff":"40ms","max_retry_after":"500ms"}` + extra + `,
	  "provider":{"remote":{"type":"openai","base_url":"` + url + `/v1","api_key":"sk-test-SECRET0000000000","model":"gpt-4o-mini"},
	              "local":{"type":"local"}}}`
}

const hello = `{"envelopeType":"answer","userMessage":"Capital of France?","idempotencyKey":"%s"}`

func TestIdempotencyAcrossRestart(t *testing.T) {
	srv := wiretest.NewServer(t, "openai_success")
	dir := t.TempDir()
	h := configured(t, dir, openaiConfig(srv.URL, ""))
	a := h.mustGenerate(t, fmt.Sprintf(hello, "idem-1"))
	// Key order and formatting do not change the request.
	b := h.mustGenerate(t, `{"idempotencyKey":"idem-1", "userMessage":"Capital of France?", "envelopeType":"answer"}`)
	if a.EnvelopeID != b.EnvelopeID || a.Text != "Paris is the capital of France." || b.Text != a.Text || a.Provider != "remote" {
		t.Fatalf("replay differs: %+v vs %+v", a, b)
	}
	if n := srv.Calls(); n != 1 {
		t.Fatalf("provider called %d times, want 1", n)
	}
	_, err := h.generate(t, `{"envelopeType":"answer","userMessage":"Capital of Spain?","idempotencyKey":"idem-1"}`)
	wantCode(t, err, "idempotency_key_mismatch", "idem-1")

	h.svc.shutdown()
	h2 := configured(t, dir, openaiConfig(srv.URL, ""))
	c := h2.mustGenerate(t, fmt.Sprintf(hello, "idem-1"))
	if c.EnvelopeID != a.EnvelopeID || srv.Calls() != 1 {
		t.Errorf("after restart: envelope %s (want %s), provider calls %d (want 1)", c.EnvelopeID, a.EnvelopeID, srv.Calls())
	}
}

func TestRetryPolicyOnTheWire(t *testing.T) {
	tests := []struct {
		name     string
		fixtures []string
		code     string
		calls    int
		slept    []time.Duration
	}{
		{"rate limit then success honours retry-after-ms", []string{"openai_429_rate_limit", "openai_success"}, "", 2, []time.Duration{120 * time.Millisecond}},
		{"server errors back off with jitter", []string{"openai_500_server_error", "openai_503_overloaded", "openai_success"}, "", 3, []time.Duration{5 * time.Millisecond, 10 * time.Millisecond}},
		{"attempts exhausted returns the last error", []string{"openai_500_server_error"}, "provider_unavailable", 3, []time.Duration{5 * time.Millisecond, 10 * time.Millisecond}},
		{"quota is not retried", []string{"openai_429_insufficient_quota", "openai_success"}, "provider_quota_exhausted", 1, nil},
		{"auth is not retried", []string{"openai_401_invalid_key", "openai_success"}, "provider_auth_failed", 1, nil},
		{"context overflow is not retried even on 500", []string{"llamacpp_500_exceed_context", "openai_success"}, "context_length_exceeded", 1, nil},
		{"vLLM message-only overflow is not retried", []string{"vllm_400_context_length", "openai_success"}, "context_length_exceeded", 1, nil},
		{"llama.cpp loading is retried", []string{"llamacpp_503_loading", "llamacpp_success"}, "", 2, []time.Duration{5 * time.Millisecond}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, tt.fixtures...)
			h := configured(t, t.TempDir(), openaiConfig(srv.URL, ""))
			_, err := h.generate(t, fmt.Sprintf(hello, fmt.Sprint("retry-", i)))
			if tt.code == "" && err != nil || tt.code != "" && (err == nil || err.Code != tt.code) {
				t.Fatalf("error %+v, want code %q", err, tt.code)
			}
			if srv.Calls() != tt.calls {
				t.Errorf("provider calls %d, want %d", srv.Calls(), tt.calls)
			}
			if got := h.sleeps.get(); fmt.Sprint(got) != fmt.Sprint(tt.slept) {
				t.Errorf("slept %v, want %v", got, tt.slept)
			}
			if err != nil && strings.Contains(err.Error()+string(err.Details), "SECRET") {
				t.Errorf("key leaked: %s", err.Error())
			}
		})
	}
}

func anthropicConfig(url string) string {
	return `{"retry":{"max_attempts":3,"initial_backoff":"10ms","max_backoff":"40ms","max_retry_after":"5s"},
	  "provider":{"claude":{"type":"anthropic","base_url":"` + url + `","api_key":"sk-ant-SECRET000000000","model":"claude-sonnet-4-5"}}}`
}

func TestAnthropicRetryDecisions(t *testing.T) {
	tests := []struct {
		name     string
		fixtures []string
		code     string
		calls    int
		slept    []time.Duration
	}{
		{"529 overloaded is retried", []string{"anthropic_529_overloaded", "anthropic_success"}, "", 2, []time.Duration{5 * time.Millisecond}},
		{"429 honours retry-after", []string{"anthropic_429_rate_limit", "anthropic_success"}, "", 2, []time.Duration{time.Second}},
		{"spend-limit 429 is not retried", []string{"anthropic_429_spend_limit", "anthropic_success"}, "provider_quota_exhausted", 1, nil},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, tt.fixtures...)
			h := configured(t, t.TempDir(), anthropicConfig(srv.URL))
			res, err := h.generate(t, fmt.Sprintf(`{"envelopeType":"a","userMessage":"hi","seed":1,"idempotencyKey":"a%d"}`, i))
			if tt.code == "" && err != nil || tt.code != "" && (err == nil || err.Code != tt.code) {
				t.Fatalf("error %+v, want code %q", err, tt.code)
			}
			if srv.Calls() != tt.calls || fmt.Sprint(h.sleeps.get()) != fmt.Sprint(tt.slept) {
				t.Errorf("calls %d slept %v; want %d %v", srv.Calls(), h.sleeps.get(), tt.calls, tt.slept)
			}
			if err == nil && (res.Provider != "claude" || len(res.Warnings) != 1) {
				t.Errorf("result %+v", res)
			}
		})
	}
}

func TestRetryNeverWaitsPastTheDeadline(t *testing.T) {
	srv := wiretest.NewServer(t, "anthropic_429_rate_limit", "anthropic_success")
	h := configured(t, t.TempDir(), anthropicConfig(srv.URL))
	// The server asks for 1s; the caller has far less.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := h.generateCtx(t, ctx, `{"envelopeType":"a","userMessage":"hi","idempotencyKey":"dl"}`)
	if err == nil || err.Code != "provider_rate_limited" || !err.Retryable || !strings.Contains(string(err.Details), `"retryAfterMs":1000`) {
		t.Fatalf("got %+v, want the server's rate-limit error with its retryAfterMs", err)
	}
	if srv.Calls() != 1 || len(h.sleeps.get()) != 0 {
		t.Errorf("calls %d, slept %v; want 1 call and no wait", srv.Calls(), h.sleeps.get())
	}
}

func TestOllamaTruncationWarning(t *testing.T) {
	srv := wiretest.NewServer(t, "ollama_truncated")
	h := configured(t, t.TempDir(), `{"provider":{"ollama":{"type":"openai","base_url":"`+srv.URL+`/v1","model":"llama3.2","context_window":4096}}}`)
	res := h.mustGenerate(t, `{"envelopeType":"s","userMessage":"summarize","idempotencyKey":"o1"}`)
	if len(res.Warnings) != 1 || res.Warnings[0].Code != "possible_truncation" {
		t.Errorf("warnings %+v", res.Warnings)
	}
	if r := srv.Requests()[0]; r.Header.Get("Authorization") != "" {
		t.Errorf("sent Authorization %q without an api_key", r.Header.Get("Authorization"))
	}
}

func TestAsyncAndAwait(t *testing.T) {
	srv := wiretest.NewServer(t, "openai_success")
	srv.Gate = make(chan struct{})
	h := configured(t, t.TempDir(), openaiConfig(srv.URL, `,"async":{"enabled":true,"workers":1}`))
	if _, ok := h.svc.facets()[aienvelope.FacetAwait]; !ok {
		t.Fatalf("facets %v lack await", h.svc.facets())
	}
	// The record is one the host advertises.
	b, _ := json.Marshal(h.svc.facets())
	var facets map[string]json.RawMessage
	if err := json.Unmarshal(b, &facets); err != nil || aienvelope.CheckFacets(facets) != nil {
		t.Errorf("facets %s: %v, %v", b, err, aienvelope.CheckFacets(facets))
	}
	p := h.mustGenerate(t, `{"envelopeType":"answer","userMessage":"Capital of France?","idempotencyKey":"as1","async":true}`)
	if p.Status != "pending" || p.EnvelopeID == "" || p.EnvelopeType != "answer" {
		t.Fatalf("pending result %+v", p)
	}
	w := h.mustAwait(t, p.EnvelopeID, 50)
	if w.Status != "pending" || !w.TimedOut || w.EnvelopeID != p.EnvelopeID {
		t.Fatalf("await before completion %+v", w)
	}
	// The same key while pending answers pending, without a second job.
	again := h.mustGenerate(t, `{"envelopeType":"answer","userMessage":"Capital of France?","idempotencyKey":"as1","async":true}`)
	if again.EnvelopeID != p.EnvelopeID || again.Status != "pending" {
		t.Fatalf("second async %+v", again)
	}
	close(srv.Gate)
	done := h.mustAwait(t, p.EnvelopeID, 20000)
	if done.Status != "completed" || done.Text != "Paris is the capital of France." || done.EnvelopeID != p.EnvelopeID {
		t.Fatalf("await %+v", done)
	}
	if srv.Calls() != 1 {
		t.Errorf("provider calls %d, want 1", srv.Calls())
	}
	_, err := h.await(t, "env_unknown", 0)
	wantCode(t, err, "not_found", "env_unknown")
	_, err = h.await(t, p.EnvelopeID, -1)
	wantCode(t, err, "validation_error", "timeoutMs")
}

func TestAsyncFailureIsRecorded(t *testing.T) {
	srv := wiretest.NewServer(t, "openai_429_insufficient_quota")
	h := configured(t, t.TempDir(), openaiConfig(srv.URL, `,"async":{"enabled":true}`))
	p := h.mustGenerate(t, `{"envelopeType":"a","userMessage":"x","idempotencyKey":"f1","async":true}`)
	_, err := h.await(t, p.EnvelopeID, 20000)
	wantCode(t, err, "provider_quota_exhausted", "quota")
}

func TestPendingAsyncJobResumesAfterRestart(t *testing.T) {
	srv := wiretest.NewServer(t, "openai_success")
	srv.Gate = make(chan struct{})
	dir := t.TempDir()
	cfg := openaiConfig(srv.URL, `,"async":{"enabled":true}`)
	h := configured(t, dir, cfg)
	p := h.mustGenerate(t, `{"envelopeType":"a","userMessage":"x","idempotencyKey":"r1","async":true}`)
	waitFor(t, func() bool { return srv.Calls() == 1 })
	// Stopping abandons the in-flight call; the job stays pending.
	h.svc.shutdown()
	close(srv.Gate)
	h2 := configured(t, dir, cfg)
	done := h2.mustAwait(t, p.EnvelopeID, 20000)
	if done.Status != "completed" || srv.Calls() != 2 {
		t.Fatalf("after restart: %+v, provider calls %d (want 2: the abandoned one and the resumed one)", done, srv.Calls())
	}
}

func TestSynchronousTwinsShareOneCall(t *testing.T) {
	srv := wiretest.NewServer(t, "openai_success")
	srv.Gate = make(chan struct{})
	h := configured(t, t.TempDir(), openaiConfig(srv.URL, ""))
	var wg sync.WaitGroup
	results := make([]aienvelope.GenerateResult, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := h.svc.call(fmt.Sprintf(hello, "twin"))
			if err == nil {
				_ = sent(out, &results[i])
			}
		}()
	}
	waitFor(t, func() bool { return srv.Calls() == 1 })
	close(srv.Gate)
	wg.Wait()
	if srv.Calls() != 1 || results[0].EnvelopeID == "" || results[0].EnvelopeID != results[1].EnvelopeID {
		t.Errorf("calls %d results %+v", srv.Calls(), results)
	}
}

// call generates req from a goroutine of its own, where a test may not
// stop: a request that does not decode is sent empty, and refused.
func (s *service) call(req string) (*aienvelope.GenerateResult, error) {
	var in aienvelope.GenerateRequest
	_ = json.Unmarshal([]byte(req), &in)
	return s.Generate(context.Background(), nil, &in)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConfigErrorsNameTheirPath(t *testing.T) {
	tests := []struct {
		config string
		path   string
	}{
		{`{"retry":{"initial_backoff":"soon"}}`, "retry.initial_backoff"},
		{`{"retry":{"max_attempts":0}}`, "retry.max_attempts"},
		{`{"async":{"workers":1.5}}`, "async.workers"},
		{`{"provider":{"x":{"type":"gemini"}}}`, "provider.x.type"},
		{`{"provider":{"x":{"type":"anthropic","model":"m"}}}`, "provider.x.api_key"},
		{`{"provider":{"x":{"type":"openai","base_url":"ftp://h"}}}`, "provider.x.base_url"},
		{`{"provider":{"x":{"type":"local","rules":"{\"rules\":[{}]}"}}}`, "provider.x.rules"},
		{`{"provider":{"x":{"type":"local","api_key":"k"}}}`, "provider.x.api_key"},
		{`{"provider":{"x":{"type":"local"}},"default_provider":"y"}`, "default_provider"},
		{`{"provider":{"x":{"type":"local"},"y":{"type":"local"}}}`, "default_provider"},
		{`{"provider":{"x":{"type":"openai","timeout":"-1s","model":"m"}}}`, "provider.x.timeout"},
		{`{"retention":{"finished":"23h59m"}}`, "retention.finished"},
		{`{"retention":{"finished":"0s"}}`, "retention.finished"},
		{`{"retention":{"finished":"-168h"}}`, "retention.finished"},
		{`{"retention":{"finished":"a week"}}`, "retention.finished"},
		{`{"retention":{"finished":"never"}}`, "retention.finished"},
		{`{"async":{"job_workers":-1}}`, "async.job_workers"},
		{`{"async":{"job_workers":0.5}}`, "async.job_workers"},
		{`{"async":{"job_lease":"500ms"}}`, "async.job_lease"},
		{`{"async":{"job_lease":"2h"}}`, "async.job_lease"},
		{`{"async":{"job_lease":"soon"}}`, "async.job_lease"},
	}
	for _, tt := range tests {
		_, err := tryConfigure(t, t.TempDir(), tt.config)
		var ces plugin.ConfigErrors
		if !errors.As(err, &ces) {
			t.Errorf("%s: got %v, want config errors", tt.config, err)
			continue
		}
		var paths []string
		for _, c := range ces {
			paths = append(paths, strings.Join(c.Path, "."))
		}
		if !strings.Contains(strings.Join(paths, " "), tt.path) {
			t.Errorf("%s: paths %v, want %s", tt.config, paths, tt.path)
		}
		if strings.Contains(err.Error(), `"k"`) {
			t.Errorf("an api_key value leaked: %v", err)
		}
	}
}

// The rules file shipped for host.hcl.example parses and scripts what it
// promises.
func TestExampleRules(t *testing.T) {
	raw, err := os.ReadFile("rules.example.json")
	if err != nil {
		t.Fatal(err)
	}
	h := configured(t, t.TempDir(), fmt.Sprintf(rulesConfig, raw))
	if res := h.mustGenerate(t, `{"envelopeType":"p","userMessage":"ping","idempotencyKey":"p"}`); res.Text != "pong" {
		t.Errorf("ping: %+v", res)
	}
	if res := h.mustGenerate(t, `{"envelopeType":"w","userMessage":"the weather?","idempotencyKey":"w"}`); len(res.ToolCalls) != 1 {
		t.Errorf("weather: %+v", res)
	}
	res := h.mustGenerate(t, `{"envelopeType":"c","systemPrompt":"classify the text","userMessage":"meh","output":{"type":"json"},"idempotencyKey":"c"}`)
	if string(res.Payload) != `{"confidence":1,"label":"neutral"}` && string(res.Payload) != `{"label":"neutral","confidence":1}` {
		t.Errorf("classify: %s", res.Payload)
	}
}
