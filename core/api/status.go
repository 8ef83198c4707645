package api

import (
	"github.com/wophost/wophost/core/httpstatus"
	"github.com/wophost/wophost/sdk/wop"
)

// StatusOf is the HTTP status a failed node execution is answered with
// (see httpstatus.Of).
func StatusOf(e *wop.Error) int { return httpstatus.Of(e) }

// StatusFor is the HTTP status of an error code alone, before its
// envelope's retryable flag is looked at (see httpstatus.For).
func StatusFor(code string) int { return httpstatus.For(code) }
