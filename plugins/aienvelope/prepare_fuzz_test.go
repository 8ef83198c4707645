package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// FuzzPrepare feeds arbitrary generate payloads through the decoding and
// checks a ctx call goes through before anything reaches a provider or
// the store: strict JSON decoding, then prepare. Nothing may panic; a
// refusal is validation_error naming a field (or the request) or
// envelope_validation_failed listing the missing variables; an accepted
// request has an idempotency key within bounds, a digest, and a digest
// that does not depend on decoding twice.
func FuzzPrepare(f *testing.F) {
	f.Add([]byte(`{"envelopeType":"greeting","userMessage":"Hi {{name}}!","variables":{"name":"Ada"},"temperature":0.3,"idempotencyKey":"k1"}`))
	f.Add([]byte(`{"envelopeType":"t","messages":[{"role":"tool","content":"x","toolCallId":"c"}],"idempotencyKey":"k","tools":[{"name":"a","inputSchema":{"type":"object"}}]}`))
	f.Add([]byte(`{"envelopeType":"t","userMessage":"x","idempotencyKey":"k","output":{"type":"json","schema":{"$ref":"#/x"}}}`))
	f.Add([]byte(`{"envelopeType":"t","userMessage":"{{ a }}{{b}}","idempotencyKey":"k"}`))
	f.Add([]byte(`{"envelopeType":"t","userMessage":"x","idempotencyKey":"k","maxTokens":-1,"temperature":3}`))
	f.Add([]byte(`{"envelopeType":"t","userMessage":"x","idempotencyKey":"k","output":{"type":"json","schema":{"$ref":"http://169.254.169.254/"}}}`))
	f.Add([]byte(`{"unknown":1}`))

	svc := &service{logger: hclog.NewNullLogger()}
	if err := svc.configure(context.Background(), &plugin.ConfigureRequest{Config: json.RawMessage(`{}`), StateDir: f.TempDir()}); err != nil {
		f.Fatalf("configure: %v", err)
	}
	f.Cleanup(svc.shutdown)
	inst := svc.current()

	f.Fuzz(func(t *testing.T, payload []byte) {
		var req aienvelope.GenerateRequest
		if err := (&plugin.Request{Payload: payload}).Decode(&req); err != nil {
			wantRefusal(t, err)
			return
		}
		p, err := inst.prepare(&req)
		if err != nil {
			wantRefusal(t, err)
			return
		}
		if req.IdempotencyKey == "" || len(req.IdempotencyKey) > maxKeyBytes {
			t.Fatalf("accepted idempotency key of %d bytes", len(req.IdempotencyKey))
		}
		if p.digest == "" || p.call == nil || p.backend == nil {
			t.Fatalf("accepted request not fully prepared: %+v", p)
		}
		var again aienvelope.GenerateRequest
		if err := (&plugin.Request{Payload: payload}).Decode(&again); err != nil {
			t.Fatalf("second decode: %v", err)
		}
		p2, err := inst.prepare(&again)
		if err != nil || p2.digest != p.digest {
			t.Fatalf("digest not stable: %s vs %v (%v)", p.digest, p2, err)
		}
	})
}

func wantRefusal(t *testing.T, err error) {
	t.Helper()
	var we *wop.Error
	if !errors.As(err, &we) {
		t.Fatalf("refusal %v (%T) is not a *wop.Error", err, err)
	}
	switch we.Code {
	case wop.CodeValidation:
		if !strings.Contains(we.Message, "field") && !strings.Contains(we.Message, "request") {
			t.Fatalf("validation_error does not name a field: %q", we.Message)
		}
	case aienvelope.CodeEnvelopeValidationFailed:
		if !strings.Contains(we.Message, "variables missing") {
			t.Fatalf("envelope_validation_failed without the missing variables: %q", we.Message)
		}
	default:
		t.Fatalf("refusal code %q (%s), want validation_error or envelope_validation_failed", we.Code, we.Message)
	}
}
