// Command scripted is a hand-written MCP stdio server for tests: it speaks
// the raw wire so it can return exactly the bytes a test needs (fields no
// SDK knows, numbers past float64 precision) and misbehave on demand
// (malformed JSON, a wrong id, an oversized answer, silence, a late
// answer, an exit in the middle of a call). The -era flag makes it a
// 2026-07-28 server, one of the 2025-11-25 kinds the backward-compatibility
// path must handle, or a server that speaks both. The -first-start flags
// make its first start fail (it exits, or ignores server/discover), as a
// server that is slow or broken once and fine afterwards. The -silent-mark
// flag lets a test see that a call to the silent tool has reached the
// server.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// PassthroughResult is what the passthrough tool returns, byte for byte.
const PassthroughResult = `{"resultType":"complete","content":[{"type":"text","text":"pass","annotations":{"audience":["user"],"priority":0.5},"futureBlockField":{"x":1}}],` +
	`"structuredContent":null,"isError":true,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"scripted","version":"1.0.0"},"vendor.example/trace":"t-1"},` +
	`"big":12345678901234567890,"small":1e-400,"precise":3.141592653589793238462643383279,"neg":-0,` +
	`"deep":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[{"k":[{"l":[1,2,{"m":null}]}]}]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],"unicode":"h\u00e9llo <&> \ud83d\ude00","unknownTopLevel":{"nested":[true,false,null]}}`

type request struct {
	JSONRPC string                     `json:"jsonrpc"`
	ID      json.RawMessage            `json:"id"`
	Method  string                     `json:"method"`
	Params  map[string]json.RawMessage `json:"params"`
}

type server struct {
	era string
	// silentDiscover makes the server ignore server/discover.
	silentDiscover bool
	// silentMark names a file that gets a line each time the silent tool
	// is called, so a test can wait for a call to be in the server's hands.
	silentMark string
	mu         sync.Mutex
	out        *bufio.Writer
	initDone   bool
	// initParams are the params of the initialize request, for echo_init.
	initParams json.RawMessage
}

func main() {
	era := flag.String("era", "modern", "modern | legacy-exit (exits on server/discover) | legacy-silent (ignores it) | legacy-error (answers -32601) | dual (answers server/discover and initialize)")
	exitFirst := flag.String("first-start-exit", "", "when this file does not exist: create it and exit at once")
	silentFirst := flag.String("first-start-silent", "", "when this file does not exist: create it and ignore server/discover for the life of this process")
	silentMark := flag.String("silent-mark", "", "a file to append a line to each time the silent tool is called")
	flag.Parse()
	s := &server{era: *era, silentMark: *silentMark, out: bufio.NewWriter(os.Stdout)}
	if firstStart(*exitFirst) {
		os.Exit(1)
	}
	s.silentDiscover = firstStart(*silentFirst)
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			s.handle(line)
		}
		if err != nil {
			return
		}
	}
}

// firstStart reports whether mark names a file that did not exist yet,
// and creates it: true on the first start only.
func firstStart(mark string) bool {
	if mark == "" {
		return false
	}
	f, err := os.OpenFile(mark, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// markSilent appends a line to the -silent-mark file, if there is one. A
// failure is reported on stderr: the test waiting for the line then fails
// on its own deadline, naming what it waited for.
func (s *server) markSilent() {
	if s.silentMark == "" {
		return
	}
	f, err := os.OpenFile(s.silentMark, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.WriteString("called\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scripted: silent mark:", err)
	}
}

func (s *server) write(parts ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range parts {
		s.out.WriteString(p)
	}
	s.out.WriteByte('\n')
	s.out.Flush()
}

func (s *server) result(id json.RawMessage, result string) {
	s.write(`{"jsonrpc":"2.0","id":`, string(id), `,"result":`, result, `}`)
}

func (s *server) error(id json.RawMessage, obj string) {
	s.write(`{"jsonrpc":"2.0","id":`, string(id), `,"error":`, obj, `}`)
}

func (s *server) handle(line []byte) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		s.write(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`)
		return
	}
	if len(req.ID) == 0 {
		return // notification
	}
	legacy := s.era != "modern"
	if s.era == "dual" {
		// A request that declares 2026-07-28 in _meta is a modern one.
		var meta map[string]json.RawMessage
		_ = json.Unmarshal(req.Params["_meta"], &meta)
		legacy = string(meta["io.modelcontextprotocol/protocolVersion"]) != `"2026-07-28"`
	}
	switch req.Method {
	case "server/discover":
		if s.silentDiscover {
			return
		}
		switch s.era {
		case "modern":
			s.result(req.ID, `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"resources":{}},"ttlMs":60000,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"scripted","version":"1.0.0"}},"extra":12345678901234567890}`)
		case "dual":
			s.result(req.ID, `{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25"],"capabilities":{"tools":{}},"ttlMs":0}`)
		case "legacy-exit":
			os.Exit(0)
		case "legacy-silent":
		default:
			s.error(req.ID, `{"code":-32601,"message":"Method not found"}`)
		}
		return
	case "initialize":
		if !legacy {
			s.error(req.ID, `{"code":-32601,"message":"initialize is not a 2026-07-28 method"}`)
			return
		}
		s.initDone = true
		s.initParams = marshalRaw(req.Params)
		s.result(req.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"scripted-legacy","version":"1.0.0"}}`)
		return
	}
	if legacy && !s.initDone {
		s.error(req.ID, `{"code":-32000,"message":"Server not initialized"}`)
		return
	}
	if !legacy {
		var meta map[string]json.RawMessage
		_ = json.Unmarshal(req.Params["_meta"], &meta)
		if string(meta["io.modelcontextprotocol/protocolVersion"]) != `"2026-07-28"` || meta["io.modelcontextprotocol/clientCapabilities"] == nil {
			s.error(req.ID, `{"code":-32602,"message":"missing _meta"}`)
			return
		}
	}
	switch req.Method {
	case "tools/list":
		cursor, ok := req.Params["cursor"]
		switch {
		case !ok:
			s.result(req.ID, `{"resultType":"complete","tools":[{"name":"passthrough","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true},"outputSchema":{"type":"object"},"futureToolField":1}],"nextCursor":"","ttlMs":0,"cacheScope":"public"}`)
		case string(cursor) == `""`:
			s.result(req.ID, `{"resultType":"complete","tools":[{"name":"echo_params","inputSchema":{"type":"object"}}],"nextCursor":"page-3","ttlMs":5,"cacheScope":"private"}`)
		default:
			s.result(req.ID, `{"resultType":"complete","tools":[],"ttlMs":5,"cacheScope":"private","cursorSeen":`+string(cursor)+`}`)
		}
	case "resources/read":
		var uri string
		_ = json.Unmarshal(req.Params["uri"], &uri)
		if uri == "file:///missing" {
			s.error(req.ID, `{"code":-32602,"message":"Resource not found","data":{"uri":"file:///missing","n":12345678901234567890}}`)
			return
		}
		s.result(req.ID, `{"resultType":"complete","contents":[{"uri":`+string(req.Params["uri"])+`,"mimeType":"text/plain","text":"hello"}],"ttlMs":1000,"cacheScope":"public"}`)
	case "tools/call":
		var name string
		_ = json.Unmarshal(req.Params["name"], &name)
		s.call(&req, name)
	default:
		s.error(req.ID, `{"code":-32601,"message":"Method not found"}`)
	}
}

func (s *server) call(req *request, name string) {
	switch name {
	case "passthrough":
		s.result(req.ID, PassthroughResult)
	case "echo_params":
		// The params exactly as received, so a test can check the _meta
		// triple and that arguments arrived unaltered.
		s.result(req.ID, `{"content":[],"structuredContent":`+marshal(req.Params)+`}`)
	case "echo_init":
		// The params of the legacy initialize, so a test can check the
		// capabilities the client declared.
		s.result(req.ID, `{"content":[],"structuredContent":`+string(s.initParams)+`}`)
	case "tool_error":
		s.error(req.ID, `{"code":-32602,"message":"Unknown tool","data":{"tool":"tool_error","big":12345678901234567890,"nested":{"a":[1,{"b":null}]}}}`)
	case "malformed":
		s.write(`{"jsonrpc":"2.0","id":`, string(req.ID), `,"result":{"content":[`)
	case "wrong_id":
		s.result(json.RawMessage(`987654321`), `{"content":[]}`)
	case "oversize":
		s.result(req.ID, `{"content":[{"type":"text","text":"`+strings.Repeat("x", 2<<20)+`"}]}`)
	case "silent":
		s.markSilent()
	case "late":
		// Answers a second later, in the background: the answer to a
		// request the client has given up on by then.
		id := req.ID
		go func() {
			time.Sleep(time.Second)
			s.result(id, `{"content":[]}`)
		}()
	case "exit":
		os.Exit(3)
	case "unknown_result_type":
		s.result(req.ID, `{"resultType":"task","task":{"id":"t1"}}`)
	case "input_loop":
		s.result(req.ID, `{"resultType":"input_required","requestState":"again"}`)
	case "state_echo":
		// First round: ask for input with a state full of characters a
		// re-encoder might change. Second round: report what came back.
		state, ok := req.Params["requestState"]
		if !ok {
			s.result(req.ID, `{"resultType":"input_required","inputRequests":{"ask":{"method":"elicitation/create","params":{"message":"Name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string","default":"anon"}},"required":["name"]}}}},"requestState":"st\u00e9<&>\"\\/x"}`)
			return
		}
		body := marshal(map[string]any{"requestState": string(state), "inputResponses": string(req.Params["inputResponses"])})
		s.result(req.ID, `{"resultType":"complete","content":[],"structuredContent":`+body+`}`)
	default:
		s.error(req.ID, fmt.Sprintf(`{"code":-32602,"message":"unknown tool %q"}`, name))
	}
}

// marshalRaw is marshal for the params object; an absent one is {}.
func marshalRaw(params map[string]json.RawMessage) json.RawMessage {
	if params == nil {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(marshal(params))
}

// marshal encodes v without HTML escaping, so echoed bytes stay as sent.
func marshal(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSpace(b.String())
}
