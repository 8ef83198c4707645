package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// message is any JSON-RPC message read from the server. The raw fields
// keep the server's bytes so results can be passed on unaltered.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// isRequest reports whether the server sent a request (legacy era only).
func (m *message) isRequest() bool { return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" }

// isResponse reports whether m answers a request.
func (m *message) isResponse() bool { return m.Method == "" && (m.Result != nil || m.Error != nil) }

// decodeMessage parses one JSON-RPC message. A result is kept as raw bytes.
func decodeMessage(b []byte) (*message, error) {
	var m message
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("malformed JSON-RPC message: %w", err)
	}
	if dec.More() {
		return nil, errors.New("malformed JSON-RPC message: data after the JSON value")
	}
	if m.JSONRPC != "2.0" {
		return nil, fmt.Errorf("malformed JSON-RPC message: jsonrpc is %q, want \"2.0\"", m.JSONRPC)
	}
	if m.Method == "" && m.Result == nil && m.Error == nil {
		return nil, errors.New("malformed JSON-RPC message: neither method, result nor error")
	}
	if m.Result != nil && m.Error != nil {
		return nil, errors.New("malformed JSON-RPC message: both result and error")
	}
	return &m, nil
}

// request is one outgoing request with what the HTTP transport needs to
// build its headers.
type request struct {
	Method string
	// Params is the complete params object, _meta included.
	Params json.RawMessage
	// Version goes into MCP-Protocol-Version; empty omits the header.
	Version string
	// Name is the Mcp-Name header value (tools/call, resources/read).
	Name    string
	HasName bool
	// ParamHeaders are the Mcp-Param-* headers, already encoded.
	ParamHeaders []header
	// Legacy marks a request inside a 2025-11-25 session.
	Legacy bool
}

type header struct{ Name, Value string }

// response is the server's answer to one request: exactly one of Result
// and Error is set.
type response struct {
	Result json.RawMessage
	Error  json.RawMessage
	// Status is the HTTP status code, 0 on stdio.
	Status int
}

// statusError is an HTTP answer without a JSON-RPC body the client could
// read; the era detection inspects it.
type statusError struct {
	Status int
	Body   []byte
}

func (e *statusError) Error() string {
	body := e.Body
	if len(body) > 200 {
		body = body[:200]
	}
	return fmt.Sprintf("HTTP status %d: %q", e.Status, body)
}

// serverRequestTimeout bounds the answer to one request a server makes of
// the client, so that a stuck answer (a slow sampling provider) cannot pile
// up; inside a pack call the call's own deadline usually comes first.
const serverRequestTimeout = 5 * time.Minute

// roundsRefusal is the JSON-RPC error a server gets for a request past
// the call's input rounds.
const roundsRefusal = `{"code":-32603,"message":"declined: the call used up its input rounds (max_rounds)"}`

// serverRequestFunc answers a request the server sends to the client
// (legacy sessions only). It returns a result or a JSON-RPC error object.
type serverRequestFunc func(ctx context.Context, method string, params json.RawMessage) (result json.RawMessage, rpcErr json.RawMessage)

// transport carries requests to one server.
type transport interface {
	// roundTrip sends req and waits for its response.
	roundTrip(ctx context.Context, req *request) (*response, error)
	// notify sends a notification.
	notify(ctx context.Context, req *request) error
	// sessionKey identifies the connection a legacy session is bound to:
	// the process on stdio, the session id on HTTP. It changes when the
	// legacy handshake must be repeated.
	sessionKey() string
	// resetSession forgets a legacy session (HTTP) so the next
	// initialize starts a new one.
	resetSession()
	// close releases the transport; stdio kills the process group.
	close()
}

// encodeRequest builds the JSON-RPC request line.
func encodeRequest(id int64, method string, params json.RawMessage) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.WriteString(strconv.FormatInt(id, 10))
	b.WriteString(`,"method":`)
	m, _ := json.Marshal(method)
	b.Write(m)
	if len(params) > 0 {
		b.WriteString(`,"params":`)
		b.Write(params)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// encodeNotification builds a JSON-RPC notification.
func encodeNotification(method string, params json.RawMessage) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","method":`)
	m, _ := json.Marshal(method)
	b.Write(m)
	if len(params) > 0 {
		b.WriteString(`,"params":`)
		b.Write(params)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// encodeResponse builds the answer to a server request.
func encodeResponse(id json.RawMessage, result, rpcErr json.RawMessage) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(id)
	if rpcErr != nil {
		b.WriteString(`,"error":`)
		b.Write(rpcErr)
	} else {
		b.WriteString(`,"result":`)
		b.Write(result)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// normalizeID turns a JSON-RPC id into a map key: numbers by their text,
// strings by their JSON text, so 1 and "1" differ as they should.
func normalizeID(id json.RawMessage) string {
	return string(bytes.TrimSpace(id))
}
