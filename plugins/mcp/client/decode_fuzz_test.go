package client

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeResponse feeds arbitrary bytes from a server through the
// decoding a response goes through: decodeMessage, then inspect for a
// result (resultType, InputRequiredResult) or parseRPCError for an error.
// Nothing may panic; an accepted message is JSON-RPC 2.0 with exactly one
// of method, result or error making sense; an input_required result
// carries inputRequests or requestState; an error object keeps its bytes.
func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"3"}]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","tools":[]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"7","result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{}}},"requestState":"opaque"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"later"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad","data":{"x":1}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":1.5}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":null}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`))
	f.Add([]byte(`{"jsonrpc":"1.0","id":1,"result":{}}{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(b)
		if err != nil {
			if m != nil || err.Error() == "" {
				t.Fatalf("refusal %v came with a message or without text", err)
			}
			return
		}
		if m.JSONRPC != "2.0" {
			t.Fatalf("accepted jsonrpc %q", m.JSONRPC)
		}
		if m.Result != nil && m.Error != nil {
			t.Fatal("accepted a message with both result and error")
		}
		switch {
		case m.Error != nil:
			e, err := parseRPCError(m.Error)
			if err != nil {
				return
			}
			if string(e.Raw) != string(m.Error) {
				t.Fatalf("error object not kept verbatim: %s vs %s", e.Raw, m.Error)
			}
			if e.Error() == "" {
				t.Fatal("RPCError renders empty")
			}
		case m.Result != nil:
			kind, head, err := inspect(m.Result)
			if err != nil {
				return
			}
			switch kind {
			case "complete":
				if head == nil {
					t.Fatal("complete result without its head")
				}
			case "input_required":
				if head == nil || (head.InputRequests == nil && head.RequestState == nil) {
					t.Fatal("input_required accepted without inputRequests or requestState")
				}
			default:
				t.Fatalf("inspect returned kind %q", kind)
			}
			if !json.Valid(m.Result) {
				t.Fatalf("accepted a result that is not JSON: %s", m.Result)
			}
		}
	})
}
