package wasmpack

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// NewCtx returns a Ctx for a node's unit test, run natively rather than
// in a module, as sdk/pack's NewCtx does for a process pack. host answers
// the node's host-service calls, nil refusing each with
// capability_not_provided; advertised is the advertisement the node sees,
// which decides its family clients. Now is the machine's clock, Random
// reads crypto/rand, variables and channels live in the Ctx, Interrupt
// finds no one to resume the node, and Logger discards.
func NewCtx(ctx context.Context, host wop.Caller, advertised map[string]map[string]json.RawMessage) *Ctx {
	cp := make(map[string]map[string]json.RawMessage, len(advertised))
	for fam, f := range advertised {
		if f == nil {
			// An advertised family without facets is an empty record,
			// never "unknown", as the host sends it.
			f = map[string]json.RawMessage{}
		}
		cp[fam] = f
	}
	return newCtx(ctx, &localHost{ctx: ctx, caller: host, channels: map[string][]byte{}, variables: map[string][]byte{}}, Run{}, cp)
}

// localHost answers a test node's imports in memory.
type localHost struct {
	ctx                 context.Context
	caller              wop.Caller
	channels, variables map[string][]byte
}

func (h *localHost) channelRead(name string) ([]byte, bool) {
	v, ok := h.channels[name]
	return v, ok
}

func (h *localHost) channelWrite(name string, value []byte) int32 {
	h.channels[name] = append([]byte(nil), value...)
	return statusOK
}

func (h *localHost) variableGet(key string) ([]byte, bool) {
	v, ok := h.variables[key]
	return v, ok
}

func (h *localHost) variableSet(key string, value []byte) int32 {
	h.variables[key] = append([]byte(nil), value...)
	return statusOK
}

func (h *localHost) interrupt([]byte) ([]byte, bool) { return nil, false }

func (h *localHost) log(int32, string) {}

func (h *localHost) nowMs() int64 { return time.Now().UnixMilli() }

func (h *localHost) random(p []byte) { _, _ = rand.Read(p) } // crypto/rand.Read never fails

// call answers as wophost_call does, from caller.
func (h *localHost) call(family, method string, payload []byte) []byte {
	var err error
	var result json.RawMessage
	if h.caller == nil {
		err = wop.NotProvided("host." + family)
	} else {
		err = h.caller.Call(h.ctx, family, method, json.RawMessage(payload), &result)
	}
	var answer any = callAnswer{Result: result}
	if err != nil {
		answer = struct {
			Error *wop.Error `json:"error"`
		}{wop.AsError(err)}
	} else if result == nil {
		answer = callAnswer{Result: json.RawMessage("null")}
	}
	b, merr := json.Marshal(answer)
	if merr != nil {
		// A wop.Error and a raw JSON result always marshal.
		return []byte(`{"error":{"code":"internal","message":"the answer does not marshal"}}`)
	}
	return b
}

// advertised is never read: newCtx is given the advertisement.
func (h *localHost) advertised() []byte { return []byte("{}") }
