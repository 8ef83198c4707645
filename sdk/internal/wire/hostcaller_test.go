package wire

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"

	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// brokerConnInfoWait is how long go-plugin's broker keeps connection
// information, and how long its Dial waits for it (a constant of
// go-plugin's, not configurable).
const brokerConnInfoWait = 5 * time.Second

// echoHost answers ping with the method name and late with a
// deadline_exceeded of its own, as a host whose hop further on timed out.
type echoHost struct {
	wophostv1.UnimplementedHostServicesServer
}

func (echoHost) Call(_ context.Context, req *wophostv1.CallRequest) (*wophostv1.CallResponse, error) {
	if req.GetMethod() == "late" {
		return nil, ToStatus(wop.Errorf(wop.CodeDeadlineExceeded, "the plugin behind this hop timed out"))
	}
	return &wophostv1.CallResponse{Result: []byte(`"` + req.GetMethod() + `"`)}, nil
}

type idleCapability struct {
	wophostv1.UnimplementedCapabilityServer
}

// brokers connects a host and a plugin through go-plugin itself (a real
// gRPC connection over a unix socket, each side with its real broker) and
// returns the host's broker, which serves HostServices, and the plugin's,
// which dials them.
func brokers(t *testing.T) (host, plugin *goplugin.GRPCBroker) {
	t.Helper()
	var pluginBroker *goplugin.GRPCBroker
	set := map[string]goplugin.Plugin{KindCapability: &CapabilityPlugin{
		NewServer: func(b *goplugin.GRPCBroker) wophostv1.CapabilityServer {
			pluginBroker = b
			return idleCapability{}
		},
	}}
	client, server := goplugin.TestPluginGRPCConn(t, false, set)
	t.Cleanup(func() {
		// The server first: closing the client asks a running server to
		// stop itself, which would race with a Stop of our own.
		server.Stop()
		_ = client.Close()
	})
	raw, err := client.Dispense(KindCapability)
	if err != nil {
		t.Fatal(err)
	}
	conn, ok := raw.(*CapabilityConn)
	if !ok || pluginBroker == nil {
		t.Fatalf("dispensed %T, plugin broker %v", raw, pluginBroker)
	}
	return conn.Broker, pluginBroker
}

// serveOn serves echoHost on the host broker under id, as
// ServeHostServices does, and returns a func that stops that server, as
// when the listener dies.
func serveOn(broker *goplugin.GRPCBroker, id uint32) (stop func()) {
	ready := make(chan *grpc.Server, 1)
	go broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(append(opts, ServerOptions(DefaultMaxMessageBytes)...)...)
		wophostv1.RegisterHostServicesServer(s, echoHost{})
		ready <- s
		return s
	})
	s := <-ready
	return s.Stop
}

func newTestCaller(t *testing.T, broker *goplugin.GRPCBroker, id uint32) *HostCaller {
	t.Helper()
	h := NewHostCaller(broker, id, DefaultMaxMessageBytes, noop.NewTracerProvider().Tracer("test"))
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// ping calls the echo host and returns the error envelope, nil on success.
func ping(t *testing.T, h *HostCaller, timeout time.Duration) *wop.Error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := h.CallRaw(ctx, "test.host", "ping", []byte(`{}`))
	if err != nil {
		return wop.AsError(err)
	}
	if string(out) != `"ping"` {
		t.Fatalf("ping answered %s", out)
	}
	return nil
}

// waitFor polls cond until it holds, failing the test after within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The host sends the connection information when it serves the id, which
// is when it hands the id over; the first call may come much later. The
// broker drops the information as soon as a dial has taken it (and after
// brokerConnInfoWait otherwise), so once the caller's own dial has ended
// no later dial could get it: a first call made then is the late first
// use, without sleeping through the broker's wait.
func TestHostCallerFirstUseLongAfterTheID(t *testing.T) {
	t.Parallel()
	hostBroker, pluginBroker := brokers(t)
	id := hostBroker.NextId()
	serveOn(hostBroker, id)
	h := newTestCaller(t, pluginBroker, id)
	waitFor(t, "connection made before the first call", 2*brokerConnInfoWait, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.dialing == nil && h.conn != nil
	})
	if we := ping(t, h, 30*time.Second); we != nil {
		t.Fatalf("first call after the connection information was taken: %v", we)
	}
}

// A failed dial is not kept: once the host serves the id, the next call
// connects.
func TestHostCallerRetriesAFailedDial(t *testing.T) {
	t.Parallel()
	hostBroker, pluginBroker := brokers(t)
	id := hostBroker.NextId()
	h := newTestCaller(t, pluginBroker, id) // nothing served on id yet

	we := ping(t, h, 30*time.Second)
	if we == nil {
		t.Fatal("a call succeeded with nothing served")
	}
	if we.Code != wop.CodeUnavailable || !we.Retryable || !strings.Contains(we.Message, "connection info") {
		t.Fatalf("call with nothing served = %#v, want a retryable unavailable naming the missing connection info", we)
	}

	serveOn(hostBroker, id)
	if we := ping(t, h, 30*time.Second); we != nil {
		t.Fatalf("call after the host served the id: %v", we)
	}
	if we := ping(t, h, 30*time.Second); we != nil {
		t.Fatalf("call on the kept connection: %v", we)
	}
}

// Only one dial can receive the connection information, so calls that
// arrive together share one dial.
func TestHostCallerConcurrentFirstCallsShareOneDial(t *testing.T) {
	t.Parallel()
	hostBroker, pluginBroker := brokers(t)
	id := hostBroker.NextId()
	h := newTestCaller(t, pluginBroker, id)

	const callers = 8
	errs := make(chan *wop.Error, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() { errs <- ping(t, h, 30*time.Second) })
	}
	// Every call joins the dial in flight before the connection
	// information is sent. The broker gives that dial brokerConnInfoWait.
	waitFor(t, "wait of every call on the one dial", brokerConnInfoWait/2, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.dialing != nil && h.dialing.waiters == callers
	})
	start := time.Now()
	serveOn(hostBroker, id)
	wg.Wait()
	close(errs)
	for we := range errs {
		if we != nil {
			t.Errorf("concurrent first call: %v", we)
		}
	}
	if took := time.Since(start); took >= brokerConnInfoWait {
		t.Errorf("concurrent first calls took %s: some waited for connection information of their own", took)
	}
}

// A connection whose listener is gone is dialled afresh through the
// broker, so the service served again on the id is reached; until then
// calls fail retryable.
func TestHostCallerRedialsABrokenConnection(t *testing.T) {
	t.Parallel()
	hostBroker, pluginBroker := brokers(t)
	id := hostBroker.NextId()
	stop := serveOn(hostBroker, id)
	h := newTestCaller(t, pluginBroker, id)
	if we := ping(t, h, 30*time.Second); we != nil {
		t.Fatal(we)
	}

	stop()
	if we := ping(t, h, 30*time.Second); we == nil || !we.Retryable {
		t.Fatalf("call to a stopped listener = %#v, want a retryable failure", we)
	}

	serveOn(hostBroker, id)
	var last *wop.Error
	for range 5 {
		last = ping(t, h, 30*time.Second)
		if last == nil {
			return
		}
		if !last.Retryable {
			t.Fatalf("call while reconnecting = %#v, want retryable", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no call reached the service served again: %v", last)
}

// A deadline_exceeded from the host while the caller still has time was a
// hop's deadline and comes back retryable; the caller's own is not.
func TestHostCallerMarksAHopDeadline(t *testing.T) {
	t.Parallel()
	hostBroker, pluginBroker := brokers(t)
	id := hostBroker.NextId()
	serveOn(hostBroker, id)
	h := newTestCaller(t, pluginBroker, id)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := h.CallRaw(ctx, "test.host", "late", []byte(`{}`))
	if we := wop.AsError(err); we == nil || we.Code != wop.CodeDeadlineExceeded || !we.Retryable {
		t.Errorf("hop deadline = %#v, want a retryable deadline_exceeded", we)
	}

	past, cancelPast := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelPast()
	_, err = h.CallRaw(past, "test.host", "ping", []byte(`{}`))
	if we := wop.AsError(err); we == nil || we.Code != wop.CodeDeadlineExceeded || we.Retryable {
		t.Errorf("own deadline = %#v, want a deadline_exceeded that is not retryable", we)
	}
}

func TestHostCallerClose(t *testing.T) {
	t.Parallel()
	hostBroker, pluginBroker := brokers(t)
	id := hostBroker.NextId()
	serveOn(hostBroker, id)
	h := newTestCaller(t, pluginBroker, id)
	if we := ping(t, h, 30*time.Second); we != nil {
		t.Fatal(we)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	we := ping(t, h, 30*time.Second)
	if we == nil || we.Code != wop.CodeUnavailable || !strings.Contains(we.Message, "closed") {
		t.Errorf("call after Close = %#v", we)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
