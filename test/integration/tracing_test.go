package integration

import (
	"context"
	"encoding/hex"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// otlpReceiver is an OTLP/gRPC trace receiver on loopback that keeps
// every span it is sent, with the service that sent it.
type otlpReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	addr string

	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	service string
	span    *tracepb.Span
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{addr: ln.Addr().String()}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return r
}

func (r *otlpReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, receivedSpan{service: service, span: s})
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// waitFor waits until a span of each name in want has arrived and
// returns them all by "service/name".
func (r *otlpReceiver) waitFor(t *testing.T, want []string) map[string]*tracepb.Span {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := map[string]*tracepb.Span{}
		r.mu.Lock()
		for _, s := range r.spans {
			got[s.service+"/"+s.span.GetName()] = s.span
		}
		r.mu.Unlock()
		missing := 0
		for _, w := range want {
			if got[w] == nil {
				missing++
			}
		}
		if missing == 0 {
			return got
		}
		if time.Now().After(deadline) {
			names := make([]string, 0, len(got))
			for k := range got {
				names = append(names, k)
			}
			sort.Strings(names)
			t.Fatalf("spans received: %v; want all of %v", names, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// One trace covers a node run end to end: the caller's traceparent, the
// host's run, the pack's node and its ctx call, the host's routing of that
// call (on the routed path) and the plugin's handling of it, each in the
// process that did it. On a direct channel the plugin's span is the
// child of the pack's ctx span.
func TestOneTraceAcrossTheHops(t *testing.T) {
	for _, tc := range []struct {
		name, hostBody string
		chain          []string
	}{
		{"routed", "  direct_channels = false\n", []string{
			"wophost/run probe.echo", "private.wophost.probe/node probe.echo", "private.wophost.probe/ctx test.echo.echo",
			"wophost/route test.echo.echo", "echo/plugin test.echo.echo",
		}},
		{"direct channel", "", []string{
			"wophost/run probe.echo", "private.wophost.probe/node probe.echo", "private.wophost.probe/ctx test.echo.echo",
			"echo/plugin test.echo.echo",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { oneTrace(t, tc.hostBody, tc.chain) })
	}
}

// oneTrace runs probe.echo under host serve with tracing, hostBody added
// to the host block, and checks that chain's spans are one trace, each the
// child of the one before.
func oneTrace(t *testing.T, hostBody string, chain []string) {
	recv := startOTLPReceiver(t)
	cfg := serveConfig(t, "", "")
	// The tracing block goes inside the host block, beside http.
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tracing := hostBody + "  tracing {\n    endpoint = \"" + recv.addr + "\"\n    insecure = true\n  }\n  http {"
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(text), "  http {", tracing, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startServe(t, cfg)

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := request(t, "POST", d.base+"/v1/nodes/probe.echo:execute", `{"input":{"hello":"trace"}}`,
		map[string]string{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"})
	if r.status != 200 {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}
	// Stopping flushes every process's exporter.
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d:\n%s", code, d.log())
	}

	spans := recv.waitFor(t, chain)
	for i, name := range chain {
		s := spans[name]
		if got := hex.EncodeToString(s.GetTraceId()); got != traceID {
			t.Errorf("%s: trace %s, want the caller's %s", name, got, traceID)
		}
		wantParent := "00f067aa0ba902b7"
		if i > 0 {
			wantParent = hex.EncodeToString(spans[chain[i-1]].GetSpanId())
		}
		if got := hex.EncodeToString(s.GetParentSpanId()); got != wantParent {
			t.Errorf("%s: parent %s, want %s (%s)", name, got, wantParent, map[bool]string{true: "the caller", false: chain[max(i-1, 0)]}[i == 0])
		}
	}
}
