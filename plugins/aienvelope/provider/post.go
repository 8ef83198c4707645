package provider

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// MaxAnswerBytes bounds a provider's answer; a longer one is
// provider_unavailable rather than an unbounded read.
const MaxAnswerBytes = 16 << 20

// Exchange is one JSON POST to a provider's HTTP API.
type Exchange struct {
	Client *http.Client
	URL    string
	Body   []byte
	// Header holds the provider's own headers (auth, API version);
	// Content-Type and the call's traceparent are added.
	Header http.Header
	// Timeout bounds the attempt; zero leaves only ctx's deadline.
	Timeout time.Duration
	// Secret is removed from every message that could quote it.
	Secret string
	// Classify turns a non-2xx answer into the error to return.
	Classify func(status int, h http.Header, raw []byte) *Error
}

// Post sends x and returns the bytes and headers of a 2xx answer. A
// transport failure, a timeout or an oversized answer is
// provider_unavailable; any other status is what x.Classify says.
func Post(ctx context.Context, x Exchange) ([]byte, http.Header, error) {
	if x.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, x.Timeout)
		defer cancel()
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, x.URL, bytes.NewReader(x.Body))
	if err != nil {
		return nil, nil, &Error{Code: wop.CodeValidation, Message: "base_url: " + Sanitize(err.Error(), x.Secret)}
	}
	for k, v := range x.Header {
		hreq.Header[k] = v
	}
	hreq.Header.Set("Content-Type", "application/json")
	// The W3C trace context of the call, so the provider's side of the
	// request joins the node run's trace.
	if cc, ok := wop.CallContextFrom(ctx); ok && cc.Traceparent != "" {
		hreq.Header.Set("traceparent", cc.Traceparent)
	}
	resp, err := x.Client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, Unavailable("the provider did not answer in time")
		}
		// The URL may carry credentials; say only what failed.
		return nil, nil, Unavailable("cannot reach the provider: %s", Sanitize(transportReason(err), x.Secret))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return nil, nil, Unavailable("reading the provider's answer: %s", Sanitize(err.Error(), x.Secret))
	}
	if len(raw) > MaxAnswerBytes {
		return nil, nil, Unavailable("the provider's answer is over %d bytes", MaxAnswerBytes)
	}
	if resp.StatusCode/100 != 2 {
		return nil, nil, x.Classify(resp.StatusCode, resp.Header, raw)
	}
	return raw, resp.Header, nil
}

// transportReason is the innermost message of a transport error, without
// the URL that the outer *url.Error adds.
func transportReason(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner.Error()
		}
	}
	return err.Error()
}
