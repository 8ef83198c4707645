package wasmpack

import (
	"context"
	"encoding/json"

	"github.com/wophost/wophost/sdk/wop"
)

// request is the envelope openwop_node_invoke receives.
type request struct {
	ABIVersion  *int            `json:"abiVersion"`
	NodeContext nodeContext     `json:"nodeContext"`
	Inputs      json.RawMessage `json:"inputs"`
}

type nodeContext struct {
	RunID        string          `json:"runId"`
	NodeID       string          `json:"nodeId"`
	TenantID     string          `json:"tenantId"`
	Attempt      int             `json:"attempt"`
	Configurable json.RawMessage `json:"configurable"`
	Agent        json.RawMessage `json:"agent"`
}

// Outcomes of a response envelope.
const (
	outcomeCompleted = "completed"
	outcomeFailed    = "failed"
)

// response is the envelope openwop_node_invoke answers with.
type response struct {
	Outcome string          `json:"outcome"`
	Output  json.RawMessage `json:"output,omitempty"`
	Error   *failure        `json:"error,omitempty"`
}

// failure is a failed outcome's error: the ABI carries the envelope's
// code, message and details.
type failure struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Details json.RawMessage `json:"details,omitempty"`
}

// invoke runs the node at index for the request envelope req and returns
// the response envelope. Every failure, the node's panic included, is a
// failed outcome: a trap would lose the reason.
func (s *server) invoke(index int32, req []byte, host imports) []byte {
	out, we := s.run(index, req, host)
	if we != nil {
		return failed(we)
	}
	b, err := json.Marshal(response{Outcome: outcomeCompleted, Output: out})
	if err != nil {
		// Output is checked JSON, so this is a bug; still an answer the
		// host can read.
		return failed(wop.Errorf(wop.CodeInternal, "encode the response: %v", err))
	}
	return b
}

// failed is the response envelope of a failed outcome.
func failed(we *wop.Error) []byte {
	b, err := json.Marshal(response{Outcome: outcomeFailed, Error: &failure{Code: we.Code, Message: we.Message, Details: we.Details}})
	if err != nil {
		// Only details can fail to encode (JSON that is not); the code
		// and message still reach the host.
		b, _ = json.Marshal(response{Outcome: outcomeFailed, Error: &failure{Code: we.Code, Message: we.Message}})
	}
	return b
}

// run decodes req, runs the node and encodes its output.
func (s *server) run(index int32, req []byte, host imports) (json.RawMessage, *wop.Error) {
	typeID, ok := s.nodeID(index)
	if !ok {
		return nil, wop.Errorf(wop.CodeNotFound, "this pack has no node at index %d (it has %d)", index, len(s.ids))
	}
	var r request
	if err := json.Unmarshal(req, &r); err != nil {
		return nil, wop.Errorf(wop.CodeValidation, "invalid request envelope: %v", err)
	}
	switch {
	case r.ABIVersion == nil:
		return nil, wop.Errorf(wop.CodeValidation, "invalid request envelope: no abiVersion")
	case *r.ABIVersion != ABIVersion:
		return nil, wop.Errorf(wop.CodeValidation, "invalid request envelope: abiVersion %d; this pack speaks %d", *r.ABIVersion, ABIVersion)
	}
	ad, we := advertisement(host)
	if we != nil {
		return nil, we
	}
	nc := r.NodeContext
	run := Run{RunID: nc.RunID, NodeID: nc.NodeID, TenantID: nc.TenantID, TypeID: typeID, Attempt: nc.Attempt,
		Configurable: nc.Configurable, Agent: nc.Agent}
	c := newCtx(context.Background(), host, run, ad)
	out, err := safely(func() (any, error) { return s.nodes[index](c, r.Inputs) })
	if err != nil {
		return nil, nodeFailure(err)
	}
	return encodeOutput(out, typeID)
}

// advertisement reads wophost_advertised: family to facets, a family
// with no facets an empty record.
func advertisement(host imports) (map[string]map[string]json.RawMessage, *wop.Error) {
	raw := host.advertised()
	ad := map[string]map[string]json.RawMessage{}
	if len(raw) == 0 {
		return ad, nil
	}
	if err := json.Unmarshal(raw, &ad); err != nil {
		return nil, wop.Errorf(wop.CodeInternal, "the host's advertisement is not an object of families: %v", err)
	}
	for fam, f := range ad {
		if f == nil {
			ad[fam] = map[string]json.RawMessage{}
		}
	}
	return ad, nil
}

// safely runs fn and turns its panic into an internal error naming the
// panic's value.
func safely(fn func() (any, error)) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, wop.Errorf(wop.CodeInternal, "node panicked: %v", r)
		}
	}()
	return fn()
}

// nodeFailure is the envelope of a node's error: a *wop.Error as it is,
// anything else internal with its text.
func nodeFailure(err error) *wop.Error {
	if we := wop.AsError(err); we != nil {
		return we
	}
	// A typed nil *wop.Error returned as an error.
	return wop.Errorf(wop.CodeInternal, "node failed with a nil *wop.Error")
}

// encodeOutput is the JSON of a node's result: nil and an empty
// json.RawMessage are null, a json.RawMessage is sent as it is once
// checked to be JSON.
func encodeOutput(out any, typeID string) (json.RawMessage, *wop.Error) {
	switch r := out.(type) {
	case nil:
		return json.RawMessage("null"), nil
	case json.RawMessage:
		if len(r) == 0 {
			return json.RawMessage("null"), nil
		}
		if !json.Valid(r) {
			return nil, wop.Errorf(wop.CodeInternal, "output of %s is not valid JSON", typeID)
		}
		return r, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, wop.Errorf(wop.CodeInternal, "encode output of %s: %v", typeID, err)
	}
	return b, nil
}
