package api

import "github.com/wophost/wophost/core/httpstatus"

// StatusFor is the HTTP status a failed node execution is answered with,
// by the error code of its envelope (see httpstatus.For).
func StatusFor(code string) int { return httpstatus.For(code) }
