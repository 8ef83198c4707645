package pack

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// A node's output is encoded and bounded as a plugin method's result is:
// an empty raw output is null, and one over the message limit is
// upstream_unavailable rather than a gRPC transport error.
func TestExecuteEncodesOutputLikeAPluginResult(t *testing.T) {
	nodes := map[string]Node{
		"test.empty": func(*Ctx, json.RawMessage) (any, error) { return json.RawMessage(nil), nil },
		"test.big":   func(*Ctx, json.RawMessage) (any, error) { return strings.Repeat("x", 2048), nil },
		"test.panic": func(*Ctx, json.RawMessage) (any, error) { panic("boom") },
	}
	s := &server{p: &Pack{Nodes: nodes}, logger: hclog.NewNullLogger(), maxBytes: 1024,
		tracer: noop.NewTracerProvider().Tracer("test"), hosts: map[uint32]*wire.HostCaller{}}
	exec := func(typeID string) (*wophostv1.ExecuteResponse, *wop.Error) {
		resp, err := s.Execute(context.Background(), &wophostv1.ExecuteRequest{TypeId: typeID, Input: []byte(`{}`),
			Call: wire.CallContextToProto(wop.CallContext{RunID: "run_1", TypeID: typeID})})
		if err != nil {
			return nil, wire.FromStatus(err)
		}
		return resp, nil
	}
	if resp, we := exec("test.empty"); we != nil || string(resp.GetOutput()) != "null" {
		t.Errorf("empty output: %v, %v", resp, we)
	}
	if _, we := exec("test.big"); we == nil || we.Code != wop.CodeUpstreamUnavailable || !strings.Contains(we.Message, "over the 1024-byte limit") {
		t.Errorf("oversized output: %v", we)
	}
	if _, we := exec("test.panic"); we == nil || we.Code != wop.CodeInternal || !strings.Contains(we.Message, "node panicked: boom") {
		t.Errorf("panic: %v", we)
	}
}
