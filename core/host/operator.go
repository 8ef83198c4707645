package host

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wophost/wophost/sdk/wop"
)

// OperatorCalls is what makes the operator's host-service calls: *Host,
// or what holds one.
type OperatorCalls interface {
	Call(ctx context.Context, family, method string, payload json.RawMessage, opts RunOptions) (json.RawMessage, error)
}

// AsOperator returns a wop.Caller whose calls are the operator's, made
// through c: the host's routing and checks, with the operator-only
// methods allowed, as `host call` makes them. The SDK's family clients
// take it.
func AsOperator(c OperatorCalls) wop.Caller { return operatorCaller{c} }

type operatorCaller struct{ c OperatorCalls }

// Call implements wop.Caller.
func (o operatorCaller) Call(ctx context.Context, family, method string, req, res any) error {
	payload, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode %s.%s request: %w", family, method, err)
	}
	out, err := o.c.Call(ctx, family, method, payload, RunOptions{})
	if err != nil {
		return err
	}
	if res == nil {
		return nil
	}
	if err := json.Unmarshal(out, res); err != nil {
		return fmt.Errorf("the %s.%s answer: %w", family, method, err)
	}
	return nil
}
