package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// passthroughResult mirrors test/mcpservers/scripted.PassthroughResult.
const passthroughResult = `{"resultType":"complete","content":[{"type":"text","text":"pass","annotations":{"audience":["user"],"priority":0.5},"futureBlockField":{"x":1}}],` +
	`"structuredContent":null,"isError":true,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"scripted","version":"1.0.0"},"vendor.example/trace":"t-1"},` +
	`"big":12345678901234567890,"small":1e-400,"precise":3.141592653589793238462643383279,"neg":-0,` +
	`"deep":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[{"k":[{"l":[1,2,{"m":null}]}]}]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],"unicode":"h\u00e9llo <&> \ud83d\ude00","unknownTopLevel":{"nested":[true,false,null]}}`

func scripted(t testing.TB, opts Options, era string) *Client {
	t.Helper()
	opts.Stdio = stdio(serverBinary(t, scriptedPkg), "-era", era)
	return newClient(t, opts)
}

func TestResultsPassThroughByteForByte(t *testing.T) {
	c := scripted(t, Options{}, "modern")
	res, err := c.CallTool(ctx(t), "passthrough", nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(res) != passthroughResult {
		t.Errorf("result altered:\n got %s\nwant %s", res, passthroughResult)
	}
	h := c.Health(ctx(t))
	if h.Status != StatusReachable || !bytes.Contains(h.Discover, []byte(`"extra":12345678901234567890`)) {
		t.Errorf("health = %+v %s", h, h.Discover)
	}
}

func TestRequestCarriesMetaAndExactArguments(t *testing.T) {
	c := scripted(t, Options{Inputs: &answerer{caps: `{"elicitation":{}}`}}, "modern")
	args := `{"n":12345678901234567890,"f":1.000000000000000000001,"s":"<&>","deep":[[[{"x":null}]]]}`
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	callCtx := wop.WithCallContext(ctx(t), wop.CallContext{RunID: "run_1", Traceparent: traceparent})
	res, err := c.CallTool(callCtx, "echo_params", json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		StructuredContent struct {
			Arguments json.RawMessage            `json:"arguments"`
			Meta      map[string]json.RawMessage `json:"_meta"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatal(err)
	}
	if got := string(r.StructuredContent.Arguments); got != args {
		t.Errorf("arguments changed on the way:\n got %s\nwant %s", got, args)
	}
	m := r.StructuredContent.Meta
	if string(m[metaProtocolVersion]) != `"2026-07-28"` || string(m[metaClientCapabilities]) != `{"elicitation":{}}` ||
		!strings.Contains(string(m[metaClientInfo]), `"name"`) {
		t.Errorf("_meta = %v", m)
	}
	if got := string(m[metaTraceparent]); got != `"`+traceparent+`"` {
		t.Errorf("_meta.traceparent = %s, want the call's %s", got, traceparent)
	}
}

func TestListToolsForwardsCursor(t *testing.T) {
	c := scripted(t, Options{}, "modern")
	first, err := c.ListTools(ctx(t), nil)
	if err != nil || !strings.Contains(string(first), `"nextCursor":""`) || !strings.Contains(string(first), `"futureToolField":1`) {
		t.Fatalf("first page %s %v", first, err)
	}
	empty := ""
	second, err := c.ListTools(ctx(t), &empty)
	if err != nil || !strings.Contains(string(second), `"echo_params"`) {
		t.Fatalf("empty-string cursor was not forwarded: %s %v", second, err)
	}
	cur := "page-3"
	third, err := c.ListTools(ctx(t), &cur)
	if err != nil || !strings.Contains(string(third), `"cursorSeen":"page-3"`) {
		t.Fatalf("cursor page-3: %s %v", third, err)
	}
}

func TestRequestStateEchoedExactly(t *testing.T) {
	c := scripted(t, Options{Inputs: &answerer{name: "x"}}, "modern")
	res, err := c.CallTool(ctx(t), "state_echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		StructuredContent struct {
			RequestState   string `json:"requestState"`
			InputResponses string `json:"inputResponses"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatal(err)
	}
	if want := `"st\u00e9<&>\"\\/x"`; r.StructuredContent.RequestState != want {
		t.Errorf("requestState came back as %s, want %s", r.StructuredContent.RequestState, want)
	}
	if want := `{"ask":{"action":"accept","content":{"name":"x"}}}`; r.StructuredContent.InputResponses != want {
		t.Errorf("inputResponses = %s, want %s", r.StructuredContent.InputResponses, want)
	}
}

func TestMCPErrorKeepsErrorObject(t *testing.T) {
	c := scripted(t, Options{}, "modern")
	_, err := c.CallTool(ctx(t), "tool_error", nil)
	var rpc *RPCError
	if !errors.As(err, &rpc) {
		t.Fatalf("err = %v, want RPCError", err)
	}
	want := `{"code":-32602,"message":"Unknown tool","data":{"tool":"tool_error","big":12345678901234567890,"nested":{"a":[1,{"b":null}]}}}`
	if string(rpc.Raw) != want || rpc.Code != -32602 {
		t.Errorf("error object altered:\n got %s\nwant %s", rpc.Raw, want)
	}
	_, err = c.ReadResource(ctx(t), "file:///missing")
	if !errors.As(err, &rpc) || !strings.Contains(string(rpc.Raw), `"n":12345678901234567890`) {
		t.Errorf("resources/read missing: %v", err)
	}
}

func TestHostileServerFailuresAreTransportErrors(t *testing.T) {
	c := scripted(t, Options{CallTimeout: 1 * time.Second, MaxMessageBytes: 1 << 20, MaxRounds: 2}, "modern")
	for _, tool := range []string{"malformed", "wrong_id", "oversize", "silent", "exit", "unknown_result_type", "input_loop"} {
		_, err := c.CallTool(ctx(t), tool, nil)
		var te *TransportError
		if !errors.As(err, &te) {
			t.Errorf("%s: err = %v, want TransportError", tool, err)
		}
		// The server is usable again right after: a restarted process
		// where the stream broke.
		res, err := c.CallTool(ctx(t), "passthrough", nil)
		if err != nil || string(res) != passthroughResult {
			t.Errorf("after %s: %v", tool, err)
		}
	}
}

func TestLegacyStdioServers(t *testing.T) {
	for _, era := range []string{"legacy-exit", "legacy-silent", "legacy-error"} {
		t.Run(era, func(t *testing.T) {
			c := scripted(t, Options{DiscoverTimeout: 500 * time.Millisecond}, era)
			res, err := c.ListTools(ctx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(res), `"passthrough"`) {
				t.Errorf("tools/list = %s", res)
			}
			if e, v := c.state(); e != eraLegacy || v != RevisionLegacy {
				t.Errorf("era %v %q, want legacy", e, v)
			}
			// The server process dies; the next call restarts it and
			// repeats the handshake.
			if _, err := c.CallTool(ctx(t), "exit", nil); err == nil {
				t.Fatal("exit: no error")
			}
			res, err = c.CallTool(ctx(t), "passthrough", nil)
			if err != nil || string(res) != passthroughResult {
				t.Fatalf("after restart: %s %v", res, err)
			}
			if h := c.Health(ctx(t)); h.Status != StatusReachable || h.ProtocolVersion != RevisionLegacy || h.Discover != nil {
				t.Errorf("health = %+v", h)
			}
		})
	}
}

func TestMinimumRevisionRefusesLegacy(t *testing.T) {
	c := scripted(t, Options{DiscoverTimeout: 500 * time.Millisecond, MinimumRevision: RevisionModern}, "legacy-error")
	_, err := c.ListTools(ctx(t), nil)
	if !errors.Is(err, ErrIncompatible) {
		t.Errorf("err = %v, want ErrIncompatible", err)
	}
	if h := c.Health(ctx(t)); h.Status != StatusIncompatible {
		t.Errorf("health = %+v, want incompatible", h)
	}
}

func TestUnreachableServer(t *testing.T) {
	c := newClient(t, Options{HTTP: &HTTPOptions{URL: "http://" + freeAddr(t) + "/mcp"}})
	if h := c.Health(ctx(t)); h.Status != StatusUnreachable {
		t.Errorf("health = %+v, want unreachable", h)
	}
	_, err := c.CallTool(ctx(t), "x", nil)
	var te *TransportError
	if !errors.As(err, &te) {
		t.Errorf("err = %v, want TransportError", err)
	}
}

// serverHealth answers from the cached probe while its ttlMs runs
// (scripted's DiscoverResult says 60000).
func TestHealthHonoursTTL(t *testing.T) {
	c := scripted(t, Options{}, "modern")
	first := c.Health(ctx(t))
	second := c.Health(ctx(t))
	if first.Status != StatusReachable || !second.CheckedAt.Equal(first.CheckedAt) {
		t.Errorf("second probe within ttlMs was not served from cache: %v then %v", first.CheckedAt, second.CheckedAt)
	}
	// Without a ttlMs (a legacy server) every check is fresh.
	l := scripted(t, Options{DiscoverTimeout: 500 * time.Millisecond}, "legacy-error")
	clock := withFakeClock(l)
	a := l.Health(ctx(t))
	clock.advance(time.Millisecond)
	b := l.Health(ctx(t))
	if a.Status != StatusReachable || !b.CheckedAt.After(a.CheckedAt) {
		t.Errorf("legacy health was cached: %v then %v", a.CheckedAt, b.CheckedAt)
	}
}

// An answer under an id the client never sent refuses the request waiting
// at once, naming that id, instead of leaving it to its timeout; the
// process serves the next request.
func TestWrongIDRefusedAtOnce(t *testing.T) {
	// The call's timeout is short enough that a client waiting it out
	// fails the test soon, and long enough that a loaded machine's
	// refusal is never mistaken for it.
	c := scripted(t, Options{CallTimeout: 20 * time.Second}, "modern")
	start := time.Now()
	_, err := c.CallTool(ctx(t), "wrong_id", nil)
	took := time.Since(start)
	var te *TransportError
	if !errors.As(err, &te) || !errors.Is(err, ErrWrongID) || !strings.Contains(err.Error(), "987654321") {
		t.Fatalf("err = %v, want a TransportError for the wrong id 987654321", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || took >= 10*time.Second {
		t.Errorf("refused after %v (%v): the timeout's answer, not the wrong id's", took, err)
	}
	res, err := c.CallTool(ctx(t), "passthrough", nil)
	if err != nil || string(res) != passthroughResult {
		t.Errorf("after the wrong id: %s %v", res, err)
	}
}

// A wrong id refuses every request waiting then, since stdio does not say
// whose answer it was.
func TestWrongIDRefusesEveryWaitingRequest(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "silent")
	opts := Options{CallTimeout: 20 * time.Second}
	opts.Stdio = stdio(serverBinary(t, scriptedPkg), "-era", "modern", "-silent-mark", mark)
	c := newClient(t, opts)
	silent := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx(t), "silent", nil)
		silent <- err
	}()
	waitForFile(t, mark)
	if _, err := c.CallTool(ctx(t), "wrong_id", nil); !errors.Is(err, ErrWrongID) {
		t.Errorf("wrong_id: %v, want ErrWrongID", err)
	}
	if err := <-silent; !errors.Is(err, ErrWrongID) || !strings.Contains(err.Error(), "987654321") {
		t.Errorf("the silent request waiting meanwhile: %v, want ErrWrongID naming 987654321", err)
	}
}

// A late answer, to a request the client gave up on, is no wrong id: it
// is dropped, and the request waiting when it comes keeps waiting.
func TestLateAnswerIsNotWrongID(t *testing.T) {
	c := scripted(t, Options{CallTimeout: time.Minute}, "modern")
	short, cancel := context.WithTimeout(ctx(t), 100*time.Millisecond)
	defer cancel()
	if _, err := c.CallTool(short, "late", nil); err == nil {
		t.Fatal("late: answered within 100ms")
	}
	// The late answer comes about a second after the request, while this
	// one waits.
	wait, cancel2 := context.WithTimeout(ctx(t), 3*time.Second)
	defer cancel2()
	_, err := c.CallTool(wait, "silent", nil)
	if errors.Is(err, ErrWrongID) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("silent while a late answer came: %v, want its own deadline", err)
	}
}

// waitForFile waits until path exists.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
