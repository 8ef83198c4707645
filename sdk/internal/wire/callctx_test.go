package wire

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// viaBytes marshals p and unmarshals it again, as it travels on the wire.
func viaBytes(t *testing.T, p *wophostv1.CallContext) *wophostv1.CallContext {
	t.Helper()
	b, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var out wophostv1.CallContext
	if err := proto.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestCallContextRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   wop.CallContext
	}{
		{
			name: "all fields",
			in: wop.CallContext{
				RunID: "run_1", NodeID: "n1", TypeID: "demo.echo", Pack: "community.demo", Caller: "pack:community.demo",
				Depth: 3, Deadline: time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC),
				Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", IdempotencyKey: "idem-1",
				Token: wop.NewRunToken("run-token-1"),
			},
		},
		{name: "zero deadline", in: wop.CallContext{RunID: "run_2", Depth: 1}},
		{name: "zero value", in: wop.CallContext{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := CallContextToProto(tt.in)
			if tt.in.Deadline.IsZero() && p.GetDeadlineUnixNano() != 0 {
				t.Errorf("DeadlineUnixNano = %d for a zero deadline, want 0", p.GetDeadlineUnixNano())
			}
			if !tt.in.Deadline.IsZero() && p.GetDeadlineUnixNano() != tt.in.Deadline.UnixNano() {
				t.Errorf("DeadlineUnixNano = %d, want %d", p.GetDeadlineUnixNano(), tt.in.Deadline.UnixNano())
			}
			got := CallContextFromProto(viaBytes(t, p))
			if !got.Deadline.Equal(tt.in.Deadline) {
				t.Errorf("deadline = %v, want %v", got.Deadline, tt.in.Deadline)
			}
			if tt.in.Deadline.IsZero() != got.Deadline.IsZero() {
				t.Errorf("deadline IsZero = %v, want %v", got.Deadline.IsZero(), tt.in.Deadline.IsZero())
			}
			// Compare the rest with the deadlines aligned (time.Unix gives
			// local time; the instant is what matters).
			got.Deadline = tt.in.Deadline
			if got != tt.in {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, tt.in)
			}
		})
	}
}

// The run token crosses the wire as run_token, whole, so the host can
// check it on the way back.
func TestCallContextCarriesTheRunToken(t *testing.T) {
	p := viaBytes(t, CallContextToProto(wop.CallContext{RunID: "run_1", Token: wop.NewRunToken("run-token-1")}))
	if p.GetRunToken() != "run-token-1" {
		t.Fatalf("run_token on the wire = %q, want run-token-1", p.GetRunToken())
	}
	if got := CallContextFromProto(p).Token; !got.Matches(wop.NewRunToken("run-token-1")) {
		t.Fatalf("token from the wire = %v, not the one sent", got)
	}
	if p := CallContextToProto(wop.CallContext{RunID: "run_1"}); p.GetRunToken() != "" {
		t.Fatalf("a call context without a token sent run_token %q", p.GetRunToken())
	}
}

func TestCallContextNegativeDepth(t *testing.T) {
	if got := CallContextToProto(wop.CallContext{Depth: -5}).GetDepth(); got != 0 {
		t.Fatalf("depth = %d, want 0", got)
	}
}

func TestCallContextFromNilProto(t *testing.T) {
	if got := CallContextFromProto(nil); got != (wop.CallContext{}) {
		t.Fatalf("CallContextFromProto(nil) = %+v, want zero", got)
	}
}

func TestWithCallDeadline(t *testing.T) {
	ctx, cancel := WithCallDeadline(context.Background(), wop.CallContext{})
	if _, ok := ctx.Deadline(); ok {
		t.Error("zero call deadline gave the context a deadline")
	}
	cancel()
	if ctx.Err() == nil {
		t.Error("cancel did not end the context")
	}

	deadline := time.Now().Add(time.Hour)
	ctx, cancel = WithCallDeadline(context.Background(), wop.CallContext{Deadline: deadline})
	defer cancel()
	if got, ok := ctx.Deadline(); !ok || !got.Equal(deadline) {
		t.Errorf("deadline = %v, %v; want %v", got, ok, deadline)
	}

	// An earlier parent deadline wins.
	parent, pcancel := context.WithDeadline(context.Background(), deadline.Add(-time.Minute))
	defer pcancel()
	ctx, cancel = WithCallDeadline(parent, wop.CallContext{Deadline: deadline})
	defer cancel()
	if got, _ := ctx.Deadline(); !got.Equal(deadline.Add(-time.Minute)) {
		t.Errorf("deadline = %v, want the parent's", got)
	}

	// A past deadline ends the context at once.
	ctx, cancel = WithCallDeadline(context.Background(), wop.CallContext{Deadline: time.Unix(1, 0)})
	defer cancel()
	if ctx.Err() != context.DeadlineExceeded {
		t.Errorf("Err() = %v, want deadline exceeded", ctx.Err())
	}
}
