package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/plugins/mcp/client"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// configErrors is what Configure's caller sees of cfg: the schema's
// constraints first, as the SDK holds a config to them, then validate.
func configErrors(t *testing.T, cfg string) plugin.ConfigErrors {
	t.Helper()
	if err := plugin.CheckConfig(configSchema(), json.RawMessage(cfg)); err != nil {
		return err.(plugin.ConfigErrors)
	}
	var rc rawConfig
	if err := json.Unmarshal([]byte(cfg), &rc); err != nil {
		t.Fatal(err)
	}
	_, errs := validate(&rc)
	return errs
}

func TestConfigValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  string
		path string
	}{
		"max_rounds too big":  {`{"max_rounds":17}`, "max_rounds"},
		"max_rounds fraction": {`{"max_rounds":2.5}`, "max_rounds"},
		"both transports":     {`{"server":{"a":{"command":["sh"],"url":"http://x"}}}`, "server.a.url"},
		"no transport":        {`{"server":{"a":{}}}`, "server.a"},
		"bad scheme":          {`{"server":{"a":{"url":"ftp://x/y"}}}`, "server.a.url"},
		"bad timeout":         {`{"server":{"a":{"url":"http://x","timeout":"soon"}}}`, "server.a.timeout"},
		"bad revision":        {`{"server":{"a":{"url":"http://x","minimum_revision":"2024-11-05"}}}`, "server.a.minimum_revision"},
		"bad policy":          {`{"server":{"a":{"url":"http://x","elicitation":{"policy":"always"}}}}`, "server.a.elicitation.policy"},
		"answers w/o fixed":   {`{"server":{"a":{"url":"http://x","elicitation":{"policy":"decline","answers":{"x":"y"}}}}}`, "server.a.elicitation.answers"},
		"bad root":            {`{"server":{"a":{"url":"http://x","root":[{"uri":"http://not-a-file"}]}}}`, "server.a.root.0.uri"},
		"bad id":              {`{"server":{"a b":{"url":"http://x"}}}`, "server.a b"},
		"id of 65 bytes":      {`{"server":{"` + strings.Repeat("a", 65) + `":{"url":"http://x"}}}`, "server." + strings.Repeat("a", 65)},
		"headers on stdio":    {`{"server":{"a":{"command":["sh"],"headers":{"A":"b"}}}}`, "server.a.headers"},
	} {
		errs := configErrors(t, tc.cfg)
		if len(errs) == 0 {
			t.Errorf("%s: accepted", name)
			continue
		}
		if got := strings.Join(errs[0].Path, "."); got != tc.path {
			t.Errorf("%s: path %q, want %q (%v)", name, got, tc.path, errs[0])
		}
	}
	// A missing executable is no configuration error: that server alone
	// fails, with the reason.
	var rc rawConfig
	_ = json.Unmarshal([]byte(`{"server":{"a":{"command":["/no/such/binary"]},"b":{"command":["sh"]}}}`), &rc)
	cfg, errs := validate(&rc)
	if len(errs) != 0 || !strings.Contains(cfg.servers["a"].unstartable, "/no/such/binary") || cfg.servers["b"].unstartable != "" {
		t.Errorf("missing executable: %v, unstartable %q and %q", errs, cfg.servers["a"].unstartable, cfg.servers["b"].unstartable)
	}
	if errs := configErrors(t, `{"server":{"`+strings.Repeat("a", 64)+`":{"url":"http://x"}}}`); len(errs) != 0 {
		t.Errorf("server id of 64 bytes refused: %v", errs)
	}
	if errs := configErrors(t, `{"max_rounds":16,"server":{"a":{"command":["sh","-c","true"],"env":{"K":"v"},"timeout":"2s","elicitation":{"policy":"fixed","answers":{"name":"x"}},"root":[{"uri":"file:///srv","name":"srv"}]},"b":{"url":"https://example.com/mcp","headers":{"Authorization":"Bearer x"},"minimum_revision":"2026-07-28"}}}`); len(errs) != 0 {
		t.Errorf("valid config refused: %v", errs)
	}
}

func TestFacets(t *testing.T) {
	p := &mcpPlugin{}
	var rc rawConfig
	_ = json.Unmarshal([]byte(`{"max_rounds":5,"server":{"b":{"url":"https://example.com/mcp","minimum_revision":"2026-07-28"},"a":{"url":"http://127.0.0.1:1/mcp"}}}`), &rc)
	cfg, errs := validate(&rc)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	p.cfg = cfg
	b, err := json.Marshal(p.facets())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"client":true,"minimumRevision":"2025-11-25","mrtr":{"maxRounds":5},"preferredVersion":"2026-07-28","refreshedAt":"2026-11-29","revisions":["2026-07-28","2025-11-25"]}`
	if string(b) != want {
		t.Errorf("facets\n got %s\nwant %s", b, want)
	}
	// The record is one the host advertises, at max_rounds' bounds too.
	for _, rounds := range []int{5, 1, 16} {
		p.cfg.maxRounds = rounds
		b, _ := json.Marshal(p.facets())
		var facets map[string]json.RawMessage
		if err := json.Unmarshal(b, &facets); err != nil {
			t.Fatal(err)
		}
		if err := mcp.CheckFacets(facets); err != nil {
			t.Errorf("max_rounds %d: %s: %v", rounds, b, err)
		}
	}
	if b, _ := json.Marshal(p.details()); string(b) != `{"servers":["a","b"]}` {
		t.Errorf("details %s", b)
	}
}

func TestElicitationPolicies(t *testing.T) {
	params := json.RawMessage(`{"message":"?","requestedSchema":{"type":"object","properties":{
		"name":{"type":"string","default":"anon"},"ok":{"type":"boolean"},"n":{"type":"integer","default":3}},"required":["name","ok"]}}`)
	for _, tc := range []struct {
		policy  string
		answers map[string]string
		want    string
	}{
		{policyDecline, nil, `{"action":"decline"}`},
		// ok is required and has no default: declined, never invented.
		{policyAcceptDefaults, nil, `{"action":"decline"}`},
		{policyFixed, map[string]string{"ok": "true"}, `{"action":"accept","content":{"n":3,"name":"anon","ok":true}}`},
		{policyFixed, map[string]string{"ok": "true", "name": "wophost", "n": "7"}, `{"action":"accept","content":{"n":7,"name":"wophost","ok":true}}`},
		{policyFixed, map[string]string{"ok": "maybe"}, `{"action":"decline"}`},
	} {
		p := &policy{server: &serverConfig{policy: tc.policy, answers: tc.answers}, logger: nil}
		p.logger = testLogger()
		got, err := p.Answer(context.Background(), "elicitation/create", params)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s %v: %s %v, want %s", tc.policy, tc.answers, got, err, tc.want)
		}
	}
	p := &policy{server: &serverConfig{policy: policyAcceptDefaults}, logger: testLogger()}
	got, _ := p.Answer(context.Background(), "elicitation/create", json.RawMessage(`{"mode":"url","message":"go","url":"https://x"}`))
	if string(got) != `{"action":"decline"}` {
		t.Errorf("url mode: %s", got)
	}
}

// fakeHost answers aiEnvelope.generate or refuses as a host that does not
// advertise aiEnvelope; it counts the probes of the advertisement.
type fakeHost struct {
	refuse bool
	got    map[string]any
	probes int
}

func (f *fakeHost) Call(_ context.Context, family, method string, req, res any) error {
	if f.refuse {
		return wop.NotProvided("host.aiEnvelope")
	}
	if method == advertisedProbe {
		f.probes++
		return wop.Errorf(wop.CodeNotFound, "family %s has no method %q", family, method)
	}
	b, _ := json.Marshal(req)
	_ = json.Unmarshal(b, &f.got)
	return json.Unmarshal([]byte(`{"envelopeType":"mcp.sampling","envelopeId":"e1","status":"completed","text":"Paris","finishReason":"stop","model":"m1","provider":"p"}`), res)
}

func TestSamplingAndRoots(t *testing.T) {
	params := json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"Capital of France?"}}],"maxTokens":20,"systemPrompt":"Be brief."}`)
	host := &fakeHost{}
	p := &policy{server: &serverConfig{id: "s", roots: []rootConfig{{URI: "file:///srv", Name: "srv"}}}, logger: testLogger()}
	got, err := p.Answer(withCaller(context.Background(), host), "sampling/createMessage", params)
	if err != nil || string(got) != `{"content":{"text":"Paris","type":"text"},"model":"m1","role":"assistant","stopReason":"endTurn"}` {
		t.Errorf("sampling: %s %v", got, err)
	}
	if host.got["systemPrompt"] != "Be brief." || host.got["maxTokens"] != float64(20) || !strings.HasPrefix(host.got["idempotencyKey"].(string), "mcp-sampling-") {
		t.Errorf("generate request = %v", host.got)
	}
	_, err = p.Answer(withCaller(context.Background(), &fakeHost{refuse: true}), "sampling/createMessage", params)
	if !errors.Is(err, errDeclined) {
		t.Errorf("refused aiEnvelope: %v, want declined", err)
	}
	got, err = p.Answer(context.Background(), "roots/list", nil)
	if err != nil || string(got) != `{"roots":[{"uri":"file:///srv","name":"srv"}]}` {
		t.Errorf("roots: %s %v", got, err)
	}
	p.server.roots = nil
	if _, err := p.Answer(context.Background(), "roots/list", nil); !errors.Is(err, errDeclined) {
		t.Errorf("no roots: %v", err)
	}
}

func testLogger() hclog.Logger { return hclog.NewNullLogger() }

// Sampling is declared only within a node run, and only when the host
// advertises aiEnvelope. The host's answer is kept for a while, and
// dropped as soon as a sampling request finds aiEnvelope gone.
func TestSamplingDeclaredOnlyWhenAIEnvelopeIsAdvertised(t *testing.T) {
	run := wop.WithCallContext(context.Background(), wop.CallContext{RunID: "run_1"})
	host := &fakeHost{}
	ctx := withCaller(run, host)
	watch := &aiEnvelopeWatch{recheck: time.Hour}
	p := &policy{server: &serverConfig{id: "s"}, ai: watch, logger: testLogger()}
	for i := 0; i < 3; i++ {
		if got := string(p.Capabilities(ctx)); got != `{"elicitation":{},"sampling":{}}` {
			t.Errorf("advertised: %s", got)
		}
	}
	if host.probes != 1 {
		t.Errorf("the host was asked %d times within the recheck, want once", host.probes)
	}

	// aiEnvelope goes away: the first sampling request that finds it so
	// stops the declaring, without waiting for the recheck.
	host.refuse = true
	params := json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"?"}}],"maxTokens":5}`)
	if _, err := p.Answer(ctx, "sampling/createMessage", params); !errors.Is(err, errDeclined) {
		t.Errorf("sampling without aiEnvelope: %v", err)
	}
	if got := string(p.Capabilities(ctx)); got != `{"elicitation":{}}` {
		t.Errorf("after aiEnvelope went away: %s", got)
	}
	// It comes back: seen once the recheck is due.
	host.refuse = false
	watch.recheck = 0
	if got := string(p.Capabilities(ctx)); got != `{"elicitation":{},"sampling":{}}` || host.probes != 2 {
		t.Errorf("after aiEnvelope came back: %s (%d probes)", got, host.probes)
	}

	for name, ctx := range map[string]context.Context{
		"not advertised": withCaller(run, &fakeHost{refuse: true}),
		"outside a run":  withCaller(context.Background(), &fakeHost{}),
		"outside a call": run,
	} {
		p := &policy{server: &serverConfig{id: "s"}, ai: newAIEnvelopeWatch(), logger: testLogger()}
		if got := string(p.Capabilities(ctx)); got != `{"elicitation":{}}` {
			t.Errorf("%s: %s", name, got)
		}
	}
	p = &policy{server: &serverConfig{id: "s", roots: []rootConfig{{URI: "file:///srv"}}}, ai: newAIEnvelopeWatch(), logger: testLogger()}
	if got := string(p.Capabilities(withCaller(run, &fakeHost{}))); got != `{"elicitation":{},"roots":{},"sampling":{}}` {
		t.Errorf("with roots: %s", got)
	}
}

// A server whose executable is missing does not fail the configuration:
// the reason is logged at warn level, and that server's calls are
// upstream_unavailable naming it and the reason.
func TestUnstartableServerFailsAlone(t *testing.T) {
	var logs strings.Builder
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
	p := &mcpPlugin{ai: newAIEnvelopeWatch(), cfg: &config{maxRounds: defaultMaxRounds}, clients: map[string]*client.Client{}}
	t.Cleanup(p.shutdown)
	err := p.configure(context.Background(), &plugin.ConfigureRequest{Logger: logger,
		Config: json.RawMessage(`{"server":{"gone":{"command":["/no/such/binary"]},"http":{"url":"http://127.0.0.1:1/mcp"}}}`)})
	if err != nil {
		t.Fatalf("configure: %v", err)
	}
	if !strings.Contains(logs.String(), "[WARN]") || !strings.Contains(logs.String(), "server=gone") || !strings.Contains(logs.String(), "/no/such/binary") {
		t.Errorf("log = %q, want a warning naming the server and its executable", logs.String())
	}
	req := &plugin.Request{Host: &fakeHost{refuse: true}}
	_, err = p.CallTool(context.Background(), req, &mcp.CallToolRequest{ServerID: "gone", Name: "x"})
	we := wop.AsError(err)
	if we == nil || we.Code != wop.CodeUpstreamUnavailable || !strings.Contains(we.Message, `"gone"`) || !strings.Contains(we.Message, "/no/such/binary") {
		t.Errorf("call to the broken server: %v", err)
	}
	h, err := p.ServerHealth(context.Background(), req, &mcp.ServerHealthRequest{ServerID: "gone"})
	if err != nil || h.Status != client.StatusUnreachable {
		t.Errorf("health = %+v %v", h, err)
	}
}

// A call whose own deadline passes, or that is cancelled, while the server
// has not answered ends with that code, not upstream_unavailable.
func TestCallContextEndsAreNotUpstreamFailures(t *testing.T) {
	transport := &client.TransportError{Op: "tools/call", Err: errors.New("no answer: context deadline exceeded")}
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	for ctx, want := range map[context.Context]string{
		expired:              wop.CodeDeadlineExceeded,
		cancelled:            wop.CodeCancelled,
		context.Background(): wop.CodeUpstreamUnavailable,
	} {
		if got := wop.CodeOf(rejection(ctx, "s", transport)); got != want {
			t.Errorf("rejection = %s, want %s", got, want)
		}
	}
	// An answer from the server stays one, whatever the context.
	rpc := &client.RPCError{Code: -32602, Message: "bad", Raw: json.RawMessage(`{"code":-32602,"message":"bad"}`)}
	if got := wop.CodeOf(rejection(expired, "s", rpc)); got != wop.CodeMCPError {
		t.Errorf("rpc error = %s, want mcp_error", got)
	}
}
