// Package tracing carries OpenTelemetry traces across wophost's process
// hops. The host decides whether tracing is on (its `tracing` block) and
// hands the OTLP settings to every plugin and pack process in the
// environment; the SDKs then export their own spans to the same collector,
// as children of the span that the call context's traceparent names.
//
// Vendors do not need this package to be traced: plugin.Serve and
// pack.Serve set it up. A handler that calls an upstream over HTTP can
// forward Request.Call.Traceparent as the W3C `traceparent` header, or use
// ContextWithTraceparent to parent spans of its own.
package tracing

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Environment variables the host sets on plugin and pack processes when
// tracing is on. Their absence means tracing is off.
const (
	EnvEndpoint = "WOPHOST_OTLP_ENDPOINT"
	EnvProtocol = "WOPHOST_OTLP_PROTOCOL"
	EnvInsecure = "WOPHOST_OTLP_INSECURE"
	EnvHeaders  = "WOPHOST_OTLP_HEADERS"
)

// OTLP transport protocols.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Settings say where spans go.
type Settings struct {
	// Endpoint is host:port of the OTLP receiver, or a URL for
	// http/protobuf (its path replaces the default /v1/traces).
	Endpoint string
	// Protocol is ProtocolGRPC or ProtocolHTTP.
	Protocol string
	// Insecure sends without TLS.
	Insecure bool
	// Headers are sent with every export (an API key, say).
	Headers map[string]string
	// SampleRatio is the share of new traces recorded, in [0, 1]. A call
	// that arrives with a sampled parent is always recorded.
	SampleRatio float64
}

// Env returns s as the environment entries a child process reads with
// SettingsFromEnv. Sampling is not passed: children follow their parent.
func (s Settings) Env() []string {
	env := []string{
		EnvEndpoint + "=" + s.Endpoint,
		EnvProtocol + "=" + s.Protocol,
		EnvInsecure + "=" + strconv.FormatBool(s.Insecure),
	}
	if len(s.Headers) > 0 {
		keys := make([]string, 0, len(s.Headers))
		for k := range s.Headers {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, url.QueryEscape(k)+"="+url.QueryEscape(s.Headers[k]))
		}
		env = append(env, EnvHeaders+"="+strings.Join(parts, ","))
	}
	return env
}

// SettingsFromEnv reads what Env wrote. ok is false when tracing is off.
func SettingsFromEnv(getenv func(string) string) (s Settings, ok bool, err error) {
	s.Endpoint = getenv(EnvEndpoint)
	if s.Endpoint == "" {
		return Settings{}, false, nil
	}
	s.Protocol = getenv(EnvProtocol)
	if s.Protocol == "" {
		s.Protocol = ProtocolGRPC
	}
	if v := getenv(EnvInsecure); v != "" {
		if s.Insecure, err = strconv.ParseBool(v); err != nil {
			return Settings{}, false, fmt.Errorf("%s: %w", EnvInsecure, err)
		}
	}
	if v := getenv(EnvHeaders); v != "" {
		s.Headers = map[string]string{}
		for _, kv := range strings.Split(v, ",") {
			k, val, found := strings.Cut(kv, "=")
			ku, err1 := url.QueryUnescape(k)
			vu, err2 := url.QueryUnescape(val)
			if !found || err1 != nil || err2 != nil || ku == "" {
				return Settings{}, false, fmt.Errorf("%s: malformed entry", EnvHeaders)
			}
			s.Headers[ku] = vu
		}
	}
	s.SampleRatio = 1
	return s, true, nil
}

// Provider is a tracer provider with the means to flush it.
type Provider struct {
	trace.TracerProvider
	// Shutdown exports what is buffered and stops the exporter.
	Shutdown func(context.Context) error
}

// Noop returns a provider that records nothing.
func Noop() *Provider {
	return &Provider{TracerProvider: noop.NewTracerProvider(), Shutdown: func(context.Context) error { return nil }}
}

// NewProvider returns a provider exporting to s, naming the process
// service (the resource's service.name).
func NewProvider(ctx context.Context, s Settings, service string) (*Provider, error) {
	exp, err := newExporter(ctx, s)
	if err != nil {
		return nil, err
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(s.SampleRatio))),
	)
	return &Provider{TracerProvider: tp, Shutdown: tp.Shutdown}, nil
}

func newExporter(ctx context.Context, s Settings) (*otlptrace.Exporter, error) {
	switch s.Protocol {
	case ProtocolGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(s.Endpoint), otlptracegrpc.WithHeaders(s.Headers)}
		if s.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		return otlptracegrpc.New(ctx, opts...)
	case ProtocolHTTP:
		opts := []otlptracehttp.Option{otlptracehttp.WithHeaders(s.Headers)}
		if strings.Contains(s.Endpoint, "://") {
			opts = append(opts, otlptracehttp.WithEndpointURL(s.Endpoint))
		} else {
			opts = append(opts, otlptracehttp.WithEndpoint(s.Endpoint))
		}
		if s.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		return otlptracehttp.New(ctx, opts...)
	}
	return nil, fmt.Errorf("unknown OTLP protocol %q (want %q or %q)", s.Protocol, ProtocolGRPC, ProtocolHTTP)
}

// ContextWithTraceparent returns ctx with the remote span context that a
// W3C traceparent names as its parent; an empty or malformed traceparent
// leaves ctx alone.
func ContextWithTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// Traceparent returns the W3C traceparent of the span in ctx, or "" when
// there is none.
func Traceparent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// FromEnv returns the provider the environment asks for (see Env), or a
// no-op provider when tracing is off. service names the process.
func FromEnv(ctx context.Context, getenv func(string) string, service string) (*Provider, error) {
	s, ok, err := SettingsFromEnv(getenv)
	if err != nil || !ok {
		return Noop(), err
	}
	return NewProvider(ctx, s, service)
}

// Enabled reports whether tracer records spans: false for the no-op
// tracer that tracing off gives, so that a caller on a hot path can skip
// building a span's name, and Start its parsing of the traceparent.
func Enabled(tracer trace.Tracer) bool {
	_, off := tracer.(noop.Tracer)
	return !off
}

// StartCall is Start for one call of family.method, in a span named
// "what family.method". With tracing off the name is not built: calls are
// many, and the string would be garbage on every one.
func StartCall(ctx context.Context, tracer trace.Tracer, traceparent, what, family, method string, kind trace.SpanKind) (context.Context, trace.Span, string) {
	if !Enabled(tracer) {
		return ctx, noop.Span{}, traceparent
	}
	return Start(ctx, tracer, traceparent, what+" "+family+"."+method, kind)
}

// Start starts a span named name as a child of the traceparent (or of the
// span already in ctx when traceparent is empty) and returns the context
// holding it with the traceparent that names it, for the next hop.
func Start(ctx context.Context, tracer trace.Tracer, traceparent, name string, kind trace.SpanKind) (context.Context, trace.Span, string) {
	// With tracing off, every call would parse and re-format the same
	// traceparent for nothing: pass it through as it is.
	if !Enabled(tracer) {
		return ctx, noop.Span{}, traceparent
	}
	ctx = ContextWithTraceparent(ctx, traceparent)
	ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(kind))
	next := Traceparent(ctx)
	if next == "" {
		next = traceparent
	}
	return ctx, span, next
}

// End ends span, marking it failed with code when err is not nil.
func End(span trace.Span, err error, code string) {
	if err != nil {
		span.SetStatus(codes.Error, code)
		span.SetAttributes(attribute.String("wophost.error.code", code))
	}
	span.End()
}
