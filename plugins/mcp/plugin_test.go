package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

func configErrors(t *testing.T, cfg string) plugin.ConfigErrors {
	t.Helper()
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
		"missing executable":  {`{"server":{"a":{"command":["/no/such/binary"]}}}`, "server.a.command"},
		"bad timeout":         {`{"server":{"a":{"url":"http://x","timeout":"soon"}}}`, "server.a.timeout"},
		"bad revision":        {`{"server":{"a":{"url":"http://x","minimum_revision":"2024-11-05"}}}`, "server.a.minimum_revision"},
		"bad policy":          {`{"server":{"a":{"url":"http://x","elicitation":{"policy":"always"}}}}`, "server.a.elicitation.policy"},
		"answers w/o fixed":   {`{"server":{"a":{"url":"http://x","elicitation":{"policy":"decline","answers":{"x":"y"}}}}}`, "server.a.elicitation.answers"},
		"bad root":            {`{"server":{"a":{"url":"http://x","root":[{"uri":"http://not-a-file"}]}}}`, "server.a.root.0.uri"},
		"bad id":              {`{"server":{"a b":{"url":"http://x"}}}`, "server.a b"},
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
	want := `{"client":{"servers":["a","b"]},"minimumRevision":"2025-11-25","mrtr":{"maxRounds":5},"preferredVersion":"2026-07-28","refreshedAt":"2026-11-29","revisions":["2026-07-28","2025-11-25"]}`
	if string(b) != want {
		t.Errorf("facets\n got %s\nwant %s", b, want)
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

// fakeHost answers aiEnvelope.generate or refuses.
type fakeHost struct {
	refuse bool
	got    map[string]any
}

func (f *fakeHost) Call(_ context.Context, family, method string, req, res any) error {
	if f.refuse {
		return wop.NotProvided("host.aiEnvelope")
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
	if string(p.Capabilities()) != `{"elicitation":{},"roots":{},"sampling":{}}` {
		t.Errorf("capabilities = %s", p.Capabilities())
	}
	p.server.roots = nil
	if _, err := p.Answer(context.Background(), "roots/list", nil); !errors.Is(err, errDeclined) {
		t.Errorf("no roots: %v", err)
	}
}

func testLogger() hclog.Logger { return hclog.NewNullLogger() }
