package aienvelope_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sync"
	"testing"

	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/plugintest"
	"github.com/wophost/wophost/sdk/wop"
)

// echoProvider is a vendor's aiEnvelope written against the typed Server:
// it answers with the user message, keeps envelopes by idempotency key,
// and fills {{name}} placeholders. Leaving out Generate would not compile.
type echoProvider struct {
	mu   sync.Mutex
	seen map[string]recorded
}

type recorded struct {
	req aienvelope.GenerateRequest
	res *aienvelope.GenerateResult
}

var placeholder = regexp.MustCompile(`\{\{([A-Za-z0-9_]+)\}\}`)

func fill(text string, vars map[string]any) (string, error) {
	var missing error
	out := placeholder.ReplaceAllStringFunc(text, func(m string) string {
		name := placeholder.FindStringSubmatch(m)[1]
		v, ok := vars[name]
		if !ok {
			missing = wop.Errorf(aienvelope.CodeEnvelopeValidationFailed, "variable %q is missing", name)
			return m
		}
		return fmt.Sprint(v)
	})
	return out, missing
}

func (p *echoProvider) Generate(_ context.Context, _ *plugin.Request, in *aienvelope.GenerateRequest) (*aienvelope.GenerateResult, error) {
	switch {
	case in.IdempotencyKey == "":
		return nil, wop.Errorf(wop.CodeValidation, `field "idempotencyKey": is required`)
	case in.Async:
		return nil, wop.NotProvided(aienvelope.CapabilityAwait)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.seen[in.IdempotencyKey]; ok {
		if !reflect.DeepEqual(r.req, *in) {
			return nil, wop.Errorf(wop.CodeIdempotencyKeyMismatch, "key %q was used for another request", in.IdempotencyKey)
		}
		return r.res, nil
	}
	if _, err := fill(in.SystemPrompt, in.Variables); err != nil {
		return nil, err
	}
	text, err := fill(in.UserMessage, in.Variables)
	if err != nil {
		return nil, err
	}
	payload, _ := json.Marshal(text)
	res := &aienvelope.GenerateResult{
		EnvelopeType: in.EnvelopeType, EnvelopeID: fmt.Sprintf("env_%d", len(p.seen)+1), Status: aienvelope.StatusCompleted,
		Payload: payload, Text: text, FinishReason: "stop", Model: "echo-1", Provider: "echo", Warnings: []aienvelope.Warning{},
	}
	p.seen[in.IdempotencyKey] = recorded{req: *in, res: res}
	return res, nil
}

// A vendor's aiEnvelope plugin written against the typed interface passes
// the protocol kit and the family's contract checks, in process.
func TestTypedServerPassesTheKit(t *testing.T) {
	newPlugin := func() *plugin.Plugin {
		f := aienvelope.NewFamily(&echoProvider{seen: map[string]recorded{}})
		f.Status, f.Since, f.Witness = wop.StatusStable, "2.0", wop.WitnessClaimsCheck
		return &plugin.Plugin{Name: "acme-echo", Version: "1.0.0", Families: []*plugin.Family{f}}
	}
	plugintest.Run(t, plugintest.Config{InProcess: newPlugin(), Calls: []plugintest.Call{{
		Family: aienvelope.Family, Method: aienvelope.MethodGenerate,
		Payload: json.RawMessage(`{"envelopeType":"t","userMessage":"hi","idempotencyKey":"k-1"}`),
	}}})
	plugintest.AIEnvelope(t, plugintest.AIEnvelopeConfig{InProcess: newPlugin()})
}

// storedProvider replays one stored result, as a plugin with a durable
// idempotency store does.
type storedProvider struct{ stored json.RawMessage }

func (p storedProvider) Generate(context.Context, *plugin.Request, *aienvelope.GenerateRequest) (*aienvelope.GenerateResult, error) {
	return &aienvelope.GenerateResult{Raw: p.stored}, nil
}

func (p storedProvider) Await(context.Context, *plugin.Request, *aienvelope.AwaitRequest) (*aienvelope.GenerateResult, error) {
	return &aienvelope.GenerateResult{Raw: p.stored}, nil
}

// A result carrying Raw leaves the family as the stored bytes, not
// re-encoded: spacing and key order are kept.
func TestRawResultSentAsStored(t *testing.T) {
	stored := json.RawMessage(`{ "status":"completed", "envelopeId":"env_1", "payload":{"b":1,"a":2}, "warnings":[] }`)
	f := aienvelope.NewFamily(storedProvider{stored: stored})
	for method, payload := range map[string]string{
		aienvelope.MethodGenerate: `{"envelopeType":"t","idempotencyKey":"k"}`,
		aienvelope.MethodAwait:    `{"envelopeId":"env_1","timeoutMs":0}`,
	} {
		out, err := f.Methods[method](context.Background(), &plugin.Request{Payload: json.RawMessage(payload)})
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if b, ok := out.(json.RawMessage); !ok || string(b) != string(stored) {
			t.Errorf("%s sent %T %s, want the stored bytes %s", method, out, out, stored)
		}
	}
	b, err := json.Marshal(aienvelope.GenerateResult{Raw: stored, Status: aienvelope.StatusPending})
	if err != nil {
		t.Fatal(err)
	}
	// encoding/json compacts what a MarshalJSON method returns; key order
	// and values stay the stored ones.
	var want bytes.Buffer
	if err := json.Compact(&want, stored); err != nil {
		t.Fatal(err)
	}
	if string(b) != want.String() {
		t.Errorf("json.Marshal = %s, want the stored result %s", b, want.String())
	}
}
