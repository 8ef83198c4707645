package wire

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// ToStatus turns err into a gRPC status error carrying the error envelope as
// an ErrorDetail. A nil err stays nil.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	detail := ToDetail(err)
	st := status.New(grpcCode(detail.GetCode()), detail.GetMessage())
	withDetail, derr := st.WithDetails(detail)
	if derr != nil {
		return st.Err()
	}
	return withDetail.Err()
}

// ToDetail is the error envelope of err as it crosses the wire, the
// context's errors given their contract codes. err must not be nil.
func ToDetail(err error) *wophostv1.ErrorDetail {
	we := FromContextError(err)
	return &wophostv1.ErrorDetail{
		Code:       we.Code,
		Message:    we.Message,
		Capability: we.Capability,
		Retryable:  we.Retryable,
		Details:    we.Details,
	}
}

// FromDetail is the *wop.Error an envelope that arrived stands for,
// classified as FromStatus says.
func FromDetail(ed *wophostv1.ErrorDetail) *wop.Error {
	return (&wop.Error{
		Code:       ed.GetCode(),
		Message:    ed.GetMessage(),
		Capability: ed.GetCapability(),
		Retryable:  ed.GetRetryable(),
		Details:    ed.GetDetails(),
	}).Classified()
}

// CodeOfStatus is the contract code of a gRPC status error, or "" for nil.
func CodeOfStatus(err error) string {
	if err == nil {
		return ""
	}
	return FromStatus(err).Code
}

// FromStatus turns an error returned by a gRPC call back into a *wop.Error.
// A status without an ErrorDetail (a transport failure, a plugin that died,
// a message over the size limit) gets a code derived from the gRPC code.
//
// An envelope that arrives is classified by wop's rule (see
// wop.Error.Classified): a family error whose nested cause is retryable,
// or an unavailable, arrives retryable even when the process that sent
// it, perhaps built with another SDK or by hand, did not say so. Applying
// the rule wherever an envelope enters a process keeps the class intact
// across every hop.
func FromStatus(err error) *wop.Error {
	if err == nil {
		return nil
	}
	var we *wop.Error
	if errors.As(err, &we) {
		return we
	}
	st, ok := status.FromError(err)
	if !ok {
		return FromContextError(err)
	}
	for _, d := range st.Details() {
		if ed, ok := d.(*wophostv1.ErrorDetail); ok {
			return FromDetail(ed)
		}
	}
	switch st.Code() {
	case codes.DeadlineExceeded:
		return &wop.Error{Code: wop.CodeDeadlineExceeded, Message: st.Message()}
	case codes.Canceled:
		return &wop.Error{Code: wop.CodeCancelled, Message: st.Message()}
	case codes.Unavailable:
		return &wop.Error{Code: wop.CodeUnavailable, Message: st.Message(), Retryable: true}
	case codes.ResourceExhausted:
		if strings.Contains(st.Message(), "message larger than max") || strings.Contains(st.Message(), "larger than max") {
			return &wop.Error{Code: wop.CodeValidation, Message: "message over the configured maximum size: " + st.Message()}
		}
		return &wop.Error{Code: wop.CodeUnavailable, Message: st.Message(), Retryable: true}
	case codes.NotFound:
		return &wop.Error{Code: wop.CodeNotFound, Message: st.Message()}
	case codes.InvalidArgument:
		return &wop.Error{Code: wop.CodeValidation, Message: st.Message()}
	}
	return &wop.Error{Code: wop.CodeInternal, Message: st.Message()}
}

// FromContextError maps context errors to their contract codes and any other
// error through wop.AsError.
func FromContextError(err error) *wop.Error {
	var we *wop.Error
	switch {
	case errors.As(err, &we):
		return we
	case errors.Is(err, context.DeadlineExceeded):
		return &wop.Error{Code: wop.CodeDeadlineExceeded, Message: "the call's deadline passed"}
	case errors.Is(err, context.Canceled):
		return &wop.Error{Code: wop.CodeCancelled, Message: "the call was cancelled"}
	}
	return wop.AsError(err)
}

func grpcCode(code string) codes.Code {
	switch code {
	case wop.CodeDeadlineExceeded:
		return codes.DeadlineExceeded
	case wop.CodeCancelled:
		return codes.Canceled
	case wop.CodeNotFound:
		return codes.NotFound
	case wop.CodeValidation:
		return codes.InvalidArgument
	case wop.CodeUnavailable:
		return codes.Unavailable
	case wop.CodeCapabilityNotProvided, wop.CodeHostCapabilityMissing:
		return codes.FailedPrecondition
	case wop.CodeCapabilityNotDeclared:
		return codes.PermissionDenied
	case wop.CodeInternal:
		return codes.Internal
	}
	return codes.Unknown
}
