package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/sdk/wop"
)

// A pack that declares aiEnvelope but not its await facet cannot start
// an asynchronous generate however it spells the member: on the direct
// channel and on the routed path alike, each spelling gets the same
// refusal, never pending.
func TestAsyncSpellingsAreRefusedOnEveryPath(t *testing.T) {
	spellings := []string{
		`"async":true`, `"Async":true`, `"ASYNC":true`, `"\u0061sync":true`, `"async":false,"async":true`,
	}
	answers := map[bool][]string{}
	for _, directCalls := range []bool{true, false} {
		cfg := aiConfigWith(t, fmt.Sprintf("direct_calls = %t", directCalls), localAI+"\n    async {\n      enabled = true\n    }")
		h := startHost(t, cfg)
		for i, s := range spellings {
			payload := fmt.Sprintf(`{"envelopeType":"x","userMessage":"hi","idempotencyKey":"s-%d",%s}`, i, s)
			in, _ := json.Marshal(map[string]string{"family": "aiEnvelope", "method": "generate", "payloadText": payload})
			res, err := h.Run(context.Background(), "probe.call", in, host.RunOptions{Timeout: time.Minute})
			var out json.RawMessage
			if res != nil {
				out = res.Output
			}
			code := wop.CodeOf(err)
			if err == nil || (code != wop.CodeCapabilityNotDeclared && code != wop.CodeValidation) {
				t.Fatalf("direct_calls = %t, {%s}: %s, %v; want capability_not_declared or validation_error", directCalls, s, out, err)
			}
			answers[directCalls] = append(answers[directCalls], code+": "+wop.AsError(err).Message)
		}
	}
	for i, s := range spellings {
		if answers[true][i] != answers[false][i] {
			t.Errorf("{%s}: on the channel %q, routed %q", s, answers[true][i], answers[false][i])
		}
	}
	t.Logf("answers: %q", answers[true])
}

// A vendor family's facet rule, declared in Describe, is listed by `host
// plugins` and holds a node's calls on the direct channel and on the
// routed path alike: testcap's test.echo.shout needs the echo facet when
// the request sets "loud", which the probe pack does not declare.
func TestVendorFacetRuleHoldsOnEveryPath(t *testing.T) {
	base := probeConfig(t, "")
	res := runHost(t, "", "--config", base, "plugins")
	if want := `echo: test.echo.shout needs the facet test.echo.echo when the request sets "loud": true`; !strings.Contains(res.stdout, want) {
		t.Fatalf("host plugins does not list the rule %q:\n%s", want, res.stdout)
	}
	cases := []struct{ payload, code string }{
		{`{"text":"hi"}`, ""},
		{`{"text":"hi","loud":false}`, ""},
		{`{"text":"hi","loud":true}`, wop.CodeCapabilityNotDeclared},
		{`{"text":"hi","\u006coud":true}`, wop.CodeCapabilityNotDeclared},
		{`{"text":"hi","Loud":true}`, wop.CodeValidation},
		{`{"text":"hi","loud":false,"loud":true}`, wop.CodeValidation},
	}
	answers := map[bool][]string{}
	for _, directCalls := range []bool{true, false} {
		cfg := base
		if !directCalls {
			text, err := os.ReadFile(base)
			if err != nil {
				t.Fatal(err)
			}
			cfg = writeConfigAsIs(t, strings.Replace(string(text), `families = ["test.echo"]`, "families = [\"test.echo\"]\n  direct_calls = false", 1))
		}
		h := startHost(t, cfg)
		for _, c := range cases {
			in, _ := json.Marshal(map[string]string{"family": "test.echo", "method": "shout", "payloadText": c.payload})
			_, err := h.Run(context.Background(), "probe.call", in, host.RunOptions{Timeout: time.Minute})
			if got := wop.CodeOf(err); got != c.code {
				t.Fatalf("direct_calls = %t, %s: %v, want code %q", directCalls, c.payload, err, c.code)
			}
			answers[directCalls] = append(answers[directCalls], fmt.Sprint(err))
		}
	}
	for i, c := range cases {
		if answers[true][i] != answers[false][i] {
			t.Errorf("%s: on the channel %q, routed %q", c.payload, answers[true][i], answers[false][i])
		}
	}
}
