package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// seen is one request a fake HTTP server received.
type seen struct {
	header http.Header
	method string
	params map[string]json.RawMessage
}

// fakeHTTP is a Streamable HTTP endpoint whose answers a test scripts.
type fakeHTTP struct {
	mu     sync.Mutex
	seen   []seen
	answer func(n int, s seen, id json.RawMessage, w http.ResponseWriter)
}

func (f *fakeHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage            `json:"id"`
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(body, &m)
	s := seen{header: r.Header.Clone(), method: m.Method, params: m.Params}
	f.mu.Lock()
	f.seen = append(f.seen, s)
	n := len(f.seen)
	f.mu.Unlock()
	if m.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	f.answer(n, s, m.ID, w)
}

func (f *fakeHTTP) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.seen...)
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func result(id json.RawMessage, r string) string {
	return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + r + `}`
}

const headerTools = `{"resultType":"complete","ttlMs":0,"cacheScope":"public","tools":[
 {"name":"h","inputSchema":{"type":"object","properties":{
   "region":{"type":"string","x-mcp-header":"Region"},
   "count":{"type":"integer","x-mcp-header":"Count"},
   "dry":{"type":"boolean","x-mcp-header":"Dry"},
   "nested":{"type":"object","properties":{"id":{"type":"string","x-mcp-header":"Id"}}},
   "plain":{"type":"string"}}}},
 {"name":"bad","inputSchema":{"type":"object","properties":{"n":{"type":"number","x-mcp-header":"N"},"s":{"type":"string","x-mcp-header":"S"}}}}]}`

func TestHTTPHeaders(t *testing.T) {
	f := &fakeHTTP{answer: func(_ int, s seen, id json.RawMessage, w http.ResponseWriter) {
		switch s.method {
		case "tools/list":
			writeJSON(w, 200, result(id, headerTools))
		default:
			writeJSON(w, 200, result(id, `{"content":[]}`))
		}
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := newClient(t, Options{HTTP: &HTTPOptions{URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer secret"}}})
	if _, err := c.CallTool(ctx(t), "h", json.RawMessage(`{"region":" eu west","count":42,"dry":false,"nested":{"id":"héllo"},"plain":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(ctx(t), "bad", json.RawMessage(`{"n":1.5,"s":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadResource(ctx(t), "file:///a b?q=1"); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 4 || reqs[0].method != "tools/list" {
		t.Fatalf("requests: %d, first %q (the tool list is fetched to learn header annotations)", len(reqs), reqs[0].method)
	}
	for _, r := range reqs {
		if r.header.Get("MCP-Protocol-Version") != RevisionModern || r.header.Get("Mcp-Method") != r.method ||
			r.header.Get("Authorization") != "Bearer secret" || !strings.Contains(r.header.Get("Accept"), "text/event-stream") {
			t.Errorf("%s: headers %v", r.method, r.header)
		}
	}
	call := reqs[1].header
	want := map[string]string{
		"Mcp-Name":         "h",
		"Mcp-Param-Region": "=?base64?IGV1IHdlc3Q=?=",
		"Mcp-Param-Count":  "42",
		"Mcp-Param-Dry":    "false",
		"Mcp-Param-Id":     "=?base64?aMOpbGxv?=",
	}
	for k, v := range want {
		if got := call.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	for k := range reqs[2].header {
		if strings.HasPrefix(k, "Mcp-Param-") {
			t.Errorf("tool with invalid annotations got header %s", k)
		}
	}
	if got := reqs[3].header.Get("Mcp-Name"); got != "file:///a b?q=1" {
		t.Errorf("resources/read Mcp-Name = %q", got)
	}
}

func TestHTTPVersionNegotiation(t *testing.T) {
	// The first request is refused with -32022 listing the version that
	// was sent: the client retries once with it.
	f := &fakeHTTP{answer: func(n int, s seen, id json.RawMessage, w http.ResponseWriter) {
		if n == 1 {
			writeJSON(w, 400, `{"jsonrpc":"2.0","id":`+string(id)+`,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}}}`)
			return
		}
		writeJSON(w, 200, result(id, `{"resultType":"complete","tools":[],"ttlMs":0,"cacheScope":"public"}`))
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := newClient(t, Options{HTTP: &HTTPOptions{URL: srv.URL}})
	if _, err := c.ListTools(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 2 || reqs[1].method != "tools/list" {
		t.Fatalf("requests = %d", len(reqs))
	}
	// A server that shares no version: the -32022 error is the answer.
	g := &fakeHTTP{answer: func(_ int, _ seen, id json.RawMessage, w http.ResponseWriter) {
		writeJSON(w, 400, `{"jsonrpc":"2.0","id":`+string(id)+`,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2099-01-01"],"requested":"2026-07-28"}}}`)
	}}
	srv2 := httptest.NewServer(g)
	defer srv2.Close()
	c2 := newClient(t, Options{HTTP: &HTTPOptions{URL: srv2.URL}})
	_, err := c2.ListTools(ctx(t), nil)
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != CodeUnsupportedProtocolVersion {
		t.Errorf("err = %v, want the -32022 RPCError", err)
	}
}

func TestHTTPLegacyFallback(t *testing.T) {
	f := &fakeHTTP{answer: func(_ int, s seen, id json.RawMessage, w http.ResponseWriter) {
		sid := s.header.Get("Mcp-Session-Id")
		switch {
		case s.method == "initialize":
			w.Header().Set("Mcp-Session-Id", "sess-1")
			writeJSON(w, 200, result(id, `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"old","version":"1"}}`))
		case sid != "sess-1":
			writeJSON(w, 400, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}`)
		default:
			// An SSE answer with a keep-alive comment and a notification
			// before the response.
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, ": keep-alive\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n")
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", result(id, `{"tools":[{"name":"legacy","inputSchema":{"type":"object"}}]}`))
		}
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := newClient(t, Options{HTTP: &HTTPOptions{URL: srv.URL}})
	res, err := c.ListTools(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(res) != `{"tools":[{"name":"legacy","inputSchema":{"type":"object"}}]}` {
		t.Errorf("result = %s", res)
	}
	var methods []string
	for _, r := range f.requests() {
		methods = append(methods, r.method)
	}
	if got := strings.Join(methods, ","); got != "tools/list,initialize,notifications/initialized,tools/list" {
		t.Errorf("requests = %s", got)
	}
	last := f.requests()[3]
	if last.header.Get("MCP-Protocol-Version") != RevisionLegacy || last.params["_meta"] != nil {
		t.Errorf("legacy request carries %v / _meta %s", last.header, last.params["_meta"])
	}
}

func TestHTTPHostileAnswers(t *testing.T) {
	for name, answer := range map[string]func(id json.RawMessage, w http.ResponseWriter){
		"malformed": func(id json.RawMessage, w http.ResponseWriter) {
			writeJSON(w, 200, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{`)
		},
		"wrong id": func(_ json.RawMessage, w http.ResponseWriter) {
			writeJSON(w, 200, result(json.RawMessage(`"nope"`), `{}`))
		},
		"oversize": func(id json.RawMessage, w http.ResponseWriter) {
			writeJSON(w, 200, result(id, `{"content":[{"type":"text","text":"`+strings.Repeat("x", 3000)+`"}]}`))
		},
		"server error": func(_ json.RawMessage, w http.ResponseWriter) { http.Error(w, "boom", http.StatusBadGateway) },
		"sse cut off": func(_ json.RawMessage, w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, ": nothing\n\n")
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(&fakeHTTP{answer: func(_ int, _ seen, id json.RawMessage, w http.ResponseWriter) { answer(id, w) }})
			defer srv.Close()
			c := newClient(t, Options{HTTP: &HTTPOptions{URL: srv.URL}, MaxMessageBytes: 2048})
			_, err := c.ReadResource(ctx(t), "file:///x")
			var te *TransportError
			if !errors.As(err, &te) {
				t.Errorf("err = %v, want TransportError", err)
			}
		})
	}
}

// MaxRounds counts the retries after the first request: a server that
// requires input on every answer gets the call once and then MaxRounds
// times again, with the round's answers, and no more.
func TestHTTPInputRoundsStopAtMaxRounds(t *testing.T) {
	for _, rounds := range []int{1, 3} {
		t.Run(fmt.Sprint(rounds), func(t *testing.T) {
			f := &fakeHTTP{answer: func(_ int, s seen, id json.RawMessage, w http.ResponseWriter) {
				switch s.method {
				case "tools/list":
					writeJSON(w, 200, result(id, `{"resultType":"complete","tools":[]}`))
				default:
					writeJSON(w, 200, result(id, `{"resultType":"input_required","inputRequests":{"ask":{"method":"elicitation/create","params":{"message":"again?"}}},"requestState":"s"}`))
				}
			}}
			srv := httptest.NewServer(f)
			defer srv.Close()
			c := newClient(t, Options{HTTP: &HTTPOptions{URL: srv.URL}, MaxRounds: rounds})
			_, err := c.CallTool(ctx(t), "ask", json.RawMessage(`{}`))
			var te *TransportError
			if !errors.As(err, &te) || !errors.Is(err, ErrRoundsExhausted) {
				t.Fatalf("err = %v, want a TransportError for exhausted rounds", err)
			}
			calls, answered := 0, 0
			for _, r := range f.requests() {
				if r.method != "tools/call" {
					continue
				}
				calls++
				if r.params["inputResponses"] != nil {
					answered++
				}
			}
			if calls != rounds+1 || answered != rounds {
				t.Errorf("the server got %d tools/call requests, %d of them with answers; want %d, %d", calls, answered, rounds+1, rounds)
			}
		})
	}
}
