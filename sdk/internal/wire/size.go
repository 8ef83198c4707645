package wire

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wophost/wophost/sdk/wop"
)

// sizeErrors is the client interceptor of every wophost connection that
// names which message went over the size limit. gRPC refuses an oversized
// message as ResourceExhausted with the same words whichever side notices
// it ("trying to send" by the sender, "received" by the receiver), so the
// status alone cannot tell a request from a result. The caller can: a
// request that fits the limit was sent, and the message that did not fit
// was then the result. The request is a validation_error, the result an
// upstream_unavailable, on every hop.
func sizeErrors(maxBytes int) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil {
			return nil
		}
		return classifySizeError(err, req, maxBytes)
	}
}

// classifySizeError turns gRPC's message-size refusal of a call whose
// request was req into the error envelope of the message at fault; any
// other error is returned as it is.
func classifySizeError(err error, req any, maxBytes int) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted || len(st.Details()) > 0 || !strings.Contains(st.Message(), "larger than max") {
		return err
	}
	size := -1
	if m, ok := req.(proto.Message); ok {
		size = proto.Size(m)
	}
	if size > maxBytes {
		return ToStatus(wop.Errorf(wop.CodeValidation, "request of %d bytes is over the %d-byte message limit: %s", size, maxBytes, st.Message()))
	}
	return ToStatus(wop.Errorf(wop.CodeUpstreamUnavailable, "result over the %d-byte message limit: %s", maxBytes, st.Message()))
}
