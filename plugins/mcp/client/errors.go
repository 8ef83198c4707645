// Package client speaks MCP to one server on behalf of the wophost mcp
// plugin: the 2026-07-28 wire (per-request _meta, resultType,
// server/discover, -32022 negotiation, multi-round input requests) and the
// 2025-11-25 backward-compatibility path, over stdio or Streamable HTTP.
//
// Results are handled as raw JSON: the client reads only the fields it must
// act on (resultType and the input-request fields) and hands the server's
// bytes on untouched, so nothing is dropped, renamed or rounded.
package client

import (
	"encoding/json"
	"errors"
	"fmt"
)

// RPCError is a JSON-RPC error response from the server. Raw is the error
// object exactly as the server sent it.
type RPCError struct {
	Code    int64
	Message string
	Raw     json.RawMessage
}

// Error implements error.
func (e *RPCError) Error() string {
	return fmt.Sprintf("server error %d: %s", e.Code, e.Message)
}

// TransportError is any failure to get a well-formed answer from the
// server: a timeout, a dead process, malformed or oversized messages, an
// unexpected HTTP status, an exhausted input-required loop.
type TransportError struct {
	Op  string
	Err error
}

// Error implements error.
func (e *TransportError) Error() string { return e.Op + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *TransportError) Unwrap() error { return e.Err }

// ErrIncompatible is wrapped by the TransportError returned when the server
// answers but shares no protocol revision with the client at or above the
// configured minimum.
var ErrIncompatible = errors.New("no common protocol revision")

// ErrRoundsExhausted is wrapped by the TransportError returned when a call
// needs more input rounds than MaxRounds allows: an input-required result
// after MaxRounds answered ones, or a legacy server's request to the client
// after MaxRounds answered during the call.
var ErrRoundsExhausted = errors.New("input rounds exhausted")

// ErrWrongID is wrapped by the TransportError returned when a stdio
// server answers with an id the client never sent while the request
// waited: the answer may have been this request's, under a wrong id.
var ErrWrongID = errors.New("response with a wrong id")

// errInitializeRefused marks a legacy handshake the server answered with a
// JSON-RPC error: it is up, but not a 2025-11-25 server.
var errInitializeRefused = errors.New("initialize refused")

// startError is a server process that could not be started. It says
// nothing of the protocol revision the server speaks.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }

func (e *startError) Unwrap() error { return e.err }

func transportErr(op string, err error) error {
	var te *TransportError
	if errors.As(err, &te) {
		return err
	}
	return &TransportError{Op: op, Err: err}
}

// parseRPCError reads the code and message of a JSON-RPC error object and
// keeps the object's bytes.
func parseRPCError(raw json.RawMessage) (*RPCError, error) {
	var e struct {
		Code    *json.Number `json:"code"`
		Message string       `json:"message"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, fmt.Errorf("malformed error object: %w", err)
	}
	if e.Code == nil {
		return nil, errors.New("error object without a code")
	}
	code, err := e.Code.Int64()
	if err != nil {
		return nil, fmt.Errorf("error code %s is not an integer", e.Code.String())
	}
	return &RPCError{Code: code, Message: e.Message, Raw: append(json.RawMessage(nil), raw...)}, nil
}
