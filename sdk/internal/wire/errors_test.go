package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wophost/wophost/sdk/wop"
)

// overWire serialises a status error as gRPC would put it on the wire and
// decodes it again, so round trips do not depend on in-memory pointers.
func overWire(t *testing.T, err error) error {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("%v (%T) is not a gRPC status error", err, err)
	}
	b, merr := proto.Marshal(st.Proto())
	if merr != nil {
		t.Fatal(merr)
	}
	var p spb.Status
	if uerr := proto.Unmarshal(b, &p); uerr != nil {
		t.Fatal(uerr)
	}
	return status.FromProto(&p).Err()
}

func TestStatusRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		in       *wop.Error
		wantGRPC codes.Code
	}{
		{
			name:     "all fields",
			in:       &wop.Error{Code: wop.CodeNotFound, Message: "no key", Capability: "host.acme.kv.get", Retryable: true, Details: json.RawMessage(`{"key":"a","n":[1,2.50]}`)},
			wantGRPC: codes.NotFound,
		},
		{
			name:     "no details",
			in:       &wop.Error{Code: wop.CodeValidation, Message: "field \"key\": must not be empty"},
			wantGRPC: codes.InvalidArgument,
		},
		{
			name:     "vendor code",
			in:       &wop.Error{Code: "acme.conflict", Message: "version mismatch", Capability: "host.acme.kv.put", Details: json.RawMessage(`{"version":3}`)},
			wantGRPC: codes.Unknown,
		},
		{name: "deadline", in: &wop.Error{Code: wop.CodeDeadlineExceeded, Message: "late"}, wantGRPC: codes.DeadlineExceeded},
		{name: "cancelled", in: &wop.Error{Code: wop.CodeCancelled, Message: "stop"}, wantGRPC: codes.Canceled},
		{name: "unavailable", in: &wop.Error{Code: wop.CodeUnavailable, Message: "down", Retryable: true}, wantGRPC: codes.Unavailable},
		{name: "not provided", in: wop.NotProvided("host.aiEnvelope.await"), wantGRPC: codes.FailedPrecondition},
		{name: "alias of not provided", in: &wop.Error{Code: wop.CodeHostCapabilityMissing, Message: "m"}, wantGRPC: codes.FailedPrecondition},
		{name: "not declared", in: &wop.Error{Code: wop.CodeCapabilityNotDeclared, Message: "m"}, wantGRPC: codes.PermissionDenied},
		{name: "internal", in: &wop.Error{Code: wop.CodeInternal, Message: "m"}, wantGRPC: codes.Internal},
		{name: "depth", in: &wop.Error{Code: wop.CodeCallDepthExceeded, Message: "m"}, wantGRPC: codes.Unknown},
		{name: "unicode message", in: &wop.Error{Code: wop.CodeMCPError, Message: "échec – 失败"}, wantGRPC: codes.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, wrap := range []bool{false, true} {
				var in error = tt.in
				if wrap {
					in = fmt.Errorf("context: %w", tt.in)
				}
				serr := ToStatus(in)
				if got := status.Code(serr); got != tt.wantGRPC {
					t.Errorf("wrap=%v: gRPC code = %v, want %v", wrap, got, tt.wantGRPC)
				}
				got := FromStatus(overWire(t, serr))
				if !reflect.DeepEqual(got, tt.in) {
					t.Errorf("wrap=%v: round trip:\n got %#v\nwant %#v", wrap, got, tt.in)
				}
			}
		})
	}
}

func TestNil(t *testing.T) {
	if err := ToStatus(nil); err != nil {
		t.Errorf("ToStatus(nil) = %v", err)
	}
	if err := FromStatus(nil); err != nil {
		t.Errorf("FromStatus(nil) = %v", err)
	}
}

func TestFromStatusPlainGRPC(t *testing.T) {
	tests := []struct {
		name      string
		code      codes.Code
		msg       string
		wantCode  string
		retryable bool
		wantMsg   string // exact, or "" for msg itself
	}{
		{name: "deadline", code: codes.DeadlineExceeded, msg: "context deadline exceeded", wantCode: wop.CodeDeadlineExceeded},
		{name: "canceled", code: codes.Canceled, msg: "context canceled", wantCode: wop.CodeCancelled},
		{name: "unavailable", code: codes.Unavailable, msg: "connection refused", wantCode: wop.CodeUnavailable, retryable: true},
		{
			name: "message too large", code: codes.ResourceExhausted, msg: "grpc: received message larger than max (5000 vs. 4096)",
			wantCode: wop.CodeValidation, wantMsg: "message over the configured maximum size: grpc: received message larger than max (5000 vs. 4096)",
		},
		{
			name: "sent message too large", code: codes.ResourceExhausted, msg: "grpc: trying to send message larger than max (5000 vs. 4096)",
			wantCode: wop.CodeValidation, wantMsg: "message over the configured maximum size: grpc: trying to send message larger than max (5000 vs. 4096)",
		},
		{name: "other exhaustion", code: codes.ResourceExhausted, msg: "too many streams", wantCode: wop.CodeUnavailable, retryable: true},
		{name: "not found", code: codes.NotFound, msg: "unknown method", wantCode: wop.CodeNotFound},
		{name: "invalid argument", code: codes.InvalidArgument, msg: "bad", wantCode: wop.CodeValidation},
		{name: "unknown", code: codes.Unknown, msg: "panic", wantCode: wop.CodeInternal},
		{name: "unimplemented", code: codes.Unimplemented, msg: "unknown service wophost.v1.Capability", wantCode: wop.CodeInternal},
		{name: "permission denied", code: codes.PermissionDenied, msg: "no", wantCode: wop.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := &wop.Error{Code: tt.wantCode, Message: tt.msg, Retryable: tt.retryable}
			if tt.wantMsg != "" {
				want.Message = tt.wantMsg
			}
			err := status.Error(tt.code, tt.msg)
			if got := FromStatus(err); !reflect.DeepEqual(got, want) {
				t.Errorf("FromStatus(%v):\n got %#v\nwant %#v", err, got, want)
			}
			if got := FromStatus(overWire(t, err)); !reflect.DeepEqual(got, want) {
				t.Errorf("FromStatus(%v) after the wire:\n got %#v\nwant %#v", err, got, want)
			}
			// A wrapped status keeps its code; gRPC then reports the whole
			// wrapped text as the message.
			wrapped := fmt.Errorf("rpc: %w", err)
			got := FromStatus(wrapped)
			if got.Code != want.Code || got.Retryable != want.Retryable || !strings.Contains(got.Message, tt.msg) {
				t.Errorf("FromStatus(%v) = %#v, want code %s", wrapped, got, want.Code)
			}
		})
	}
}

func TestFromStatusNonStatusErrors(t *testing.T) {
	we := &wop.Error{Code: wop.CodeNotFound, Message: "x"}
	tests := []struct {
		name string
		err  error
		want *wop.Error
	}{
		{"deadline", context.DeadlineExceeded, &wop.Error{Code: wop.CodeDeadlineExceeded, Message: "the call's deadline passed"}},
		{"wrapped deadline", fmt.Errorf("dial: %w", context.DeadlineExceeded), &wop.Error{Code: wop.CodeDeadlineExceeded, Message: "the call's deadline passed"}},
		{"canceled", context.Canceled, &wop.Error{Code: wop.CodeCancelled, Message: "the call was cancelled"}},
		{"wrapped canceled", fmt.Errorf("read: %w", context.Canceled), &wop.Error{Code: wop.CodeCancelled, Message: "the call was cancelled"}},
		{"plain", errors.New("boom"), &wop.Error{Code: wop.CodeInternal, Message: "boom"}},
		{"wop error", we, we},
		{"wrapped wop error", fmt.Errorf("a: %w", we), we},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromStatus(tt.err)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FromStatus:\n got %#v\nwant %#v", got, tt.want)
			}
			if got := FromContextError(tt.err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FromContextError:\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
	if got := FromStatus(we); got != we {
		t.Errorf("FromStatus(*wop.Error) = %p, want the same pointer %p", got, we)
	}
}

func TestToStatusContextErrors(t *testing.T) {
	tests := []struct {
		err      error
		grpcCode codes.Code
		code     string
	}{
		{context.DeadlineExceeded, codes.DeadlineExceeded, wop.CodeDeadlineExceeded},
		{fmt.Errorf("x: %w", context.Canceled), codes.Canceled, wop.CodeCancelled},
		{errors.New("boom"), codes.Internal, wop.CodeInternal},
	}
	for _, tt := range tests {
		serr := ToStatus(tt.err)
		if got := status.Code(serr); got != tt.grpcCode {
			t.Errorf("ToStatus(%v) gRPC code = %v, want %v", tt.err, got, tt.grpcCode)
		}
		if got := FromStatus(overWire(t, serr)); got.Code != tt.code || got.Retryable {
			t.Errorf("round trip of %v = %#v, want code %s", tt.err, got, tt.code)
		}
	}
}

func TestToStatusCarriesMessage(t *testing.T) {
	serr := ToStatus(&wop.Error{Code: wop.CodeNotFound, Message: "no key a", Capability: "host.acme.kv.get"})
	st, _ := status.FromError(serr)
	if st.Message() != "no key a" {
		t.Errorf("status message = %q", st.Message())
	}
	if !strings.Contains(serr.Error(), "no key a") {
		t.Errorf("status error text = %q", serr.Error())
	}
}

// An envelope that arrives is classified by wop's rule, whoever built it:
// a family error over a retryable cause arrives retryable.
func TestFromStatusClassifies(t *testing.T) {
	cause := &wop.Error{Code: wop.CodeUnavailable, Message: "host.aiEnvelope.generate: the plugin went away during the call", Retryable: true}
	byHand := (&wop.Error{Code: "consensus_failed", Message: "round 1 produced no valid ballot"}).
		WithDetails(map[string]any{"rounds": 1, "cause": cause})
	got := FromStatus(overWire(t, ToStatus(byHand)))
	if !got.Retryable || got.Code != "consensus_failed" || got.Message != "round 1 produced no valid ballot (retryable: caused by unavailable)" {
		t.Errorf("hand-built family error over unavailable arrived as %#v", got)
	}
	if string(got.Details) != string(byHand.Details) {
		t.Errorf("details changed on the way: %s, want %s", got.Details, byHand.Details)
	}

	bare := &wop.Error{Code: wop.CodeUnavailable, Message: "down"}
	if got := FromStatus(overWire(t, ToStatus(bare))); !got.Retryable || got.Message != "down" {
		t.Errorf("unavailable without its flag arrived as %#v", got)
	}

	permanent := (&wop.Error{Code: "consensus_failed", Message: "no ballot"}).
		WithDetails(map[string]any{"cause": &wop.Error{Code: wop.CodeValidation, Message: "no vote"}})
	if got := FromStatus(overWire(t, ToStatus(permanent))); !reflect.DeepEqual(got, permanent) {
		t.Errorf("a family error over a permanent cause changed:\n got %#v\nwant %#v", got, permanent)
	}
}
