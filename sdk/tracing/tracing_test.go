package tracing

import (
	"context"
	"errors"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestSettingsEnvRoundTrip(t *testing.T) {
	in := Settings{Endpoint: "collector:4317", Protocol: ProtocolGRPC, Insecure: true,
		Headers: map[string]string{"x-api-key": "a=b,c", "tenant": "t 1"}}
	env := map[string]string{}
	for _, kv := range in.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	out, ok, err := SettingsFromEnv(func(k string) string { return env[k] })
	if err != nil || !ok {
		t.Fatalf("SettingsFromEnv: ok=%v err=%v", ok, err)
	}
	if out.Endpoint != in.Endpoint || out.Protocol != in.Protocol || !out.Insecure ||
		out.Headers["x-api-key"] != "a=b,c" || out.Headers["tenant"] != "t 1" || out.SampleRatio != 1 {
		t.Fatalf("round trip: %+v", out)
	}
}

func TestSettingsFromEnvOffAndMalformed(t *testing.T) {
	if _, ok, err := SettingsFromEnv(func(string) string { return "" }); ok || err != nil {
		t.Fatalf("empty env: ok=%v err=%v", ok, err)
	}
	for name, env := range map[string]map[string]string{
		"insecure": {EnvEndpoint: "x:1", EnvInsecure: "maybe"},
		"headers":  {EnvEndpoint: "x:1", EnvHeaders: "novalue"},
	} {
		if _, _, err := SettingsFromEnv(func(k string) string { return env[k] }); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := NewProvider(context.Background(), Settings{Endpoint: "x:1", Protocol: "carrier-pigeon"}, "svc"); err == nil {
		t.Error("unknown protocol accepted")
	}
}

func TestStartChainsTraceparents(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracer := tp.Tracer("test")

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx, span, next := Start(context.Background(), tracer, parent, "hop one", trace.SpanKindServer)
	if !strings.HasPrefix(next, "00-4bf92f3577b34da6a3ce929d0e0e4736-") || next == parent {
		t.Fatalf("traceparent for the next hop = %q", next)
	}
	_, child, _ := Start(ctx, tracer, next, "hop two", trace.SpanKindClient)
	End(child, errors.New("boom"), "upstream_unavailable")
	End(span, nil, "")

	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	two, one := spans[0], spans[1]
	if one.Parent().SpanID().String() != "00f067aa0ba902b7" || two.Parent().SpanID() != one.SpanContext().SpanID() {
		t.Fatalf("parents: one←%s two←%s", one.Parent().SpanID(), two.Parent().SpanID())
	}
	if one.SpanContext().TraceID() != two.SpanContext().TraceID() || one.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatal("the hops are not in the caller's trace")
	}
	if two.Status().Description != "upstream_unavailable" {
		t.Fatalf("status %+v", two.Status())
	}
}

func TestStartWithoutTracingKeepsTheTraceparent(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	_, span, next := Start(context.Background(), Noop().Tracer("x"), parent, "hop", trace.SpanKindServer)
	End(span, nil, "")
	if next != parent {
		t.Fatalf("next = %q, want the incoming traceparent", next)
	}
	if _, _, next := Start(context.Background(), Noop().Tracer("x"), "", "hop", trace.SpanKindServer); next != "" {
		t.Fatalf("next = %q without any trace", next)
	}
	if got := Traceparent(ContextWithTraceparent(context.Background(), "garbage")); got != "" {
		t.Fatalf("malformed traceparent produced %q", got)
	}
}
