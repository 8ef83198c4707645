package hostwire

import (
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/internal/wire"
	"github.com/wophost/wophost/sdk/wop"
)

// The host answers with the handshake the SDKs serve with; a host that
// shook hands differently would start no plugin.
func TestHandshakeIsTheSDKs(t *testing.T) {
	if Handshake != wire.Handshake {
		t.Errorf("Handshake = %+v, the SDKs serve %+v", Handshake, wire.Handshake)
	}
}

// What the host sends comes back as it went, envelope and call context.
func TestWireRoundTrip(t *testing.T) {
	in := wop.Errorf(wop.CodeNotFound, "no such thing").WithRetryable(false)
	if got := FromStatus(ToStatus(in)); got.Code != in.Code || got.Message != in.Message {
		t.Errorf("FromStatus(ToStatus(%v)) = %v", in, got)
	}
	call := wop.CallContext{RunID: "r", NodeID: "n", Depth: 2, Deadline: time.Unix(0, 42)}
	if got := CallContextFromProto(CallContextToProto(call)); got.RunID != call.RunID || got.NodeID != call.NodeID || got.Depth != call.Depth || !got.Deadline.Equal(call.Deadline) {
		t.Errorf("call context round trip = %+v, want %+v", got, call)
	}
}
