package direct

import (
	"context"

	"google.golang.org/protobuf/proto"

	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// A pack's channel carries the host's node runs: the Execute a gRPC
// round trip would carry, as one frame each way (kindExecute), so that a
// run's hop to the pack crosses one goroutine hand-off on each side as a
// call on a plugin's channel does.

// executeContext separates the MAC of a node run from the other frames
// the host signs with a channel's key: none can stand for another.
const executeContext = "wophost-direct execute\x00"

// executeMAC is the MAC of an ExecuteRequest's bytes.
func executeMAC(key, req []byte) []byte { return macOf(key, executeContext, req) }

// ExecuteHandler runs one node run the host sent on a pack's channel and
// returns its answer, with the node's failure, if it failed, in the
// answer's failure field.
type ExecuteHandler func(ctx context.Context, req *wophostv1.ExecuteRequest) *wophostv1.ExecuteResponse

// NewExecuteEndpoint returns a pack's channel, on which the host sends
// node runs, each run on execute. It refuses every other frame, and a
// plugin's channel refuses node runs. Open starts it; only the settings'
// key (the MAC key of the host's runs) and socket directory count.
func NewExecuteEndpoint(execute ExecuteHandler, maxBytes int) *Endpoint {
	e := NewEndpoint(nil, maxBytes)
	e.execute = execute
	return e
}

// runNode runs the node run a kindExecute frame's body asks for, when
// its MAC holds under the current key, and answers the ExecuteResponse's
// bytes.
func (e *Endpoint) runNode(ctx context.Context, body []byte) ([]byte, error) {
	msg, err := e.unsign(body, executeMAC, "a node run")
	if err != nil {
		return nil, err
	}
	req := &wophostv1.ExecuteRequest{}
	if err := proto.Unmarshal(msg, req); err != nil {
		return nil, wop.Errorf(wop.CodeValidation, "the node run cannot be read: %v", err)
	}
	return proto.Marshal(e.execute(ctx, req))
}

// Execute sends a node run on a pack's channel and returns the pack's
// answer, the node's failure in its failure field. sent is false when
// the run did not reach the pack (the channel unreachable, the key
// refused): it may then go on gRPC. A channel that closes during the run
// fails it with ErrGone, and one whose ctx ends with ctx's error.
func (r *Relay) Execute(ctx context.Context, req *wophostv1.ExecuteRequest) (resp *wophostv1.ExecuteResponse, sent bool, err error) {
	resp = &wophostv1.ExecuteResponse{}
	if sent, err = r.exchange(ctx, kindExecute, req, resp, "the run of "+req.GetTypeId()); err != nil || !sent {
		return nil, sent, err
	}
	return resp, true, nil
}
