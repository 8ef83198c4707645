package wire

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// gRPC words a size refusal the same way whichever side notices it: the
// request decides which message was at fault.
func TestSizeErrorsNameTheMessageAtFault(t *testing.T) {
	const limit = 1000
	small := &wophostv1.InvokeRequest{Family: "test.echo", Method: "echo", Payload: []byte(`{}`)}
	big := &wophostv1.InvokeRequest{Family: "test.echo", Method: "echo", Payload: []byte(strings.Repeat("x", 2*limit))}
	for _, words := range []string{
		"grpc: trying to send message larger than max (2010 vs. 1000)",
		"grpc: received message larger than max (2010 vs. 1000)",
	} {
		err := status.Error(codes.ResourceExhausted, words)
		if c := FromStatus(classifySizeError(err, big, limit)).Code; c != wop.CodeValidation {
			t.Errorf("oversized request, %q: %s, want validation_error", words, c)
		}
		if c := FromStatus(classifySizeError(err, small, limit)).Code; c != wop.CodeUpstreamUnavailable {
			t.Errorf("oversized result, %q: %s, want upstream_unavailable", words, c)
		}
	}
	// Other errors pass through untouched.
	other := status.Error(codes.ResourceExhausted, "quota")
	if got := classifySizeError(other, small, limit); !errors.Is(got, other) && got != other {
		t.Errorf("other ResourceExhausted changed: %v", got)
	}
	enveloped := ToStatus(wop.Errorf(wop.CodeValidation, "larger than max, said the plugin"))
	if got := classifySizeError(enveloped, small, limit); got != enveloped {
		t.Errorf("an envelope changed: %v", got)
	}
}
