package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/tetratelabs/wazero/api"
)

// Outcomes of a response envelope.
const (
	OutcomeCompleted = "completed"
	OutcomeSuspended = "suspended"
	OutcomeFailed    = "failed"
)

// Invocation is one run of one node.
type Invocation struct {
	TypeID  string
	Request Request
	Imports Imports
	// Seed seeds the instance's WASI random_get stream (the Go runtime
	// reads it), so that a replay of the run sees the same bytes.
	Seed [32]byte
}

// Request is what the request envelope carries.
type Request struct {
	RunID, NodeID, TenantID string
	Attempt                 int
	Configurable            json.RawMessage // nil -> {}
	Agent                   json.RawMessage // nil -> null
	Inputs                  json.RawMessage // nil -> {}
}

// Response is the module's response envelope, checked: Outcome is one of
// the three, with its member.
type Response struct {
	Outcome   string
	Output    json.RawMessage // completed
	Interrupt json.RawMessage // suspended
	Error     *ResponseError  // failed
}

// ResponseError is the error of a failed response.
type ResponseError struct {
	Code, Message string
	Details       json.RawMessage
}

// Invoke runs one node on a fresh instance (from the warm pool, else
// instantiated now) and closes that instance before returning: no state
// survives between invocations.
func (m *Module) Invoke(ctx context.Context, inv Invocation) (*Response, error) {
	index := slices.Index(m.nodeIDs, inv.TypeID)
	if index < 0 {
		return nil, fmt.Errorf("wasm: %s: %w: %q", m.packName, ErrUnknownNode, inv.TypeID)
	}
	req, err := encodeRequest(inv.Request)
	if err != nil {
		return nil, fmt.Errorf("wasm: %s: %s: %w", m.packName, inv.TypeID, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("wasm: %s: %s: stopped by the caller: %w", m.packName, inv.TypeID, err)
	}
	r, err := m.start(ctx, inv.Imports, m.pool.take())
	if err != nil {
		return nil, fmt.Errorf("wasm: %s: %s: instantiate: %w", m.packName, inv.TypeID, err)
	}
	defer r.end()
	r.inst.rand.bind(inv.Seed)
	resp, err := r.invoke(index, req)
	if err == nil {
		err = r.memoryBreach()
	}
	if err != nil {
		return nil, fmt.Errorf("wasm: %s: %s: %w", m.packName, inv.TypeID, err)
	}
	return resp, nil
}

// invoke hands the request to openwop_node_invoke and reads the response.
func (r *run) invoke(index int, req []byte) (*Response, error) {
	res, err := r.call(expAlloc, api.EncodeU32(uint32(len(req))))
	if err != nil {
		return nil, err
	}
	ptr := api.DecodeU32(res[0])
	if ptr == 0 || !r.inst.mod.Memory().Write(ptr, req) {
		return nil, &Trap{Message: fmt.Sprintf("%s(%d) answered %d, not room for the request in memory of %d bytes",
			expAlloc, len(req), ptr, r.inst.mod.Memory().Size())}
	}
	res, err = r.call(expNodeInvoke, api.EncodeI32(int32(index)), api.EncodeU32(ptr), api.EncodeU32(uint32(len(req))))
	if err != nil {
		return nil, err
	}
	body, err := r.readResult(expNodeInvoke+" response", res, MaxResponseBytes)
	if err != nil {
		return nil, err
	}
	return decodeResponse(body)
}

// encodeRequest writes the request envelope, refusing a member that is not
// JSON.
func encodeRequest(req Request) ([]byte, error) {
	configurable, err := jsonOr("Configurable", req.Configurable, "{}")
	if err != nil {
		return nil, err
	}
	agent, err := jsonOr("Agent", req.Agent, "null")
	if err != nil {
		return nil, err
	}
	inputs, err := jsonOr("Inputs", req.Inputs, "{}")
	if err != nil {
		return nil, err
	}
	type nodeContext struct {
		RunID        string          `json:"runId"`
		NodeID       string          `json:"nodeId"`
		TenantID     string          `json:"tenantId"`
		Attempt      int             `json:"attempt"`
		Configurable json.RawMessage `json:"configurable"`
		Agent        json.RawMessage `json:"agent"`
	}
	return json.Marshal(struct {
		ABIVersion  int             `json:"abiVersion"`
		NodeContext nodeContext     `json:"nodeContext"`
		Inputs      json.RawMessage `json:"inputs"`
	}{1, nodeContext{req.RunID, req.NodeID, req.TenantID, req.Attempt, configurable, agent}, inputs})
}

func jsonOr(field string, v json.RawMessage, empty string) (json.RawMessage, error) {
	if v == nil {
		return json.RawMessage(empty), nil
	}
	if !json.Valid(v) {
		return nil, fmt.Errorf("request.%s: not valid JSON", field)
	}
	return v, nil
}

// decodeResponse checks a response envelope.
func decodeResponse(body []byte) (*Response, error) {
	var env struct {
		Outcome   *string         `json:"outcome"`
		Output    json.RawMessage `json:"output"`
		Interrupt json.RawMessage `json:"interrupt"`
		Error     *struct {
			Code    string          `json:"code"`
			Message string          `json:"message"`
			Details json.RawMessage `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, &EnvelopeError{Problem: "not a JSON object: " + err.Error()}
	}
	if env.Outcome == nil {
		return nil, &EnvelopeError{Problem: "outcome: missing"}
	}
	resp := &Response{Outcome: *env.Outcome}
	switch resp.Outcome {
	case OutcomeCompleted:
		if env.Output == nil {
			return nil, &EnvelopeError{Problem: "output: missing from a completed response"}
		}
		resp.Output = env.Output
	case OutcomeSuspended:
		if env.Interrupt == nil || !bytes.HasPrefix(env.Interrupt, []byte("{")) {
			return nil, &EnvelopeError{Problem: "interrupt: a suspended response needs an interrupt object"}
		}
		resp.Interrupt = env.Interrupt
	case OutcomeFailed:
		if env.Error == nil {
			return nil, &EnvelopeError{Problem: "error: missing from a failed response"}
		}
		if env.Error.Code == "" {
			return nil, &EnvelopeError{Problem: "error.code: missing from a failed response"}
		}
		resp.Error = &ResponseError{Code: env.Error.Code, Message: env.Error.Message, Details: env.Error.Details}
	default:
		return nil, &EnvelopeError{Problem: fmt.Sprintf("outcome: %q is not one of %s, %s, %s",
			resp.Outcome, OutcomeCompleted, OutcomeSuspended, OutcomeFailed)}
	}
	return resp, nil
}
