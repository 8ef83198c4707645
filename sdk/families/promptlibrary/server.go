package promptlibrary

import (
	"context"

	"github.com/wophost/wophost/sdk/plugin"
)

// Server is what a plugin implements to serve promptLibrary. Written
// against it, a missing method is the compiler's error rather than the
// conformance kit's.
type Server interface {
	// Get returns the pinned version verbatim: Raw the stored bytes,
	// Digest their sha256 (CheckAnswer is what the host holds it to).
	Get(ctx context.Context, req *plugin.Request, in *GetRequest) (*Prompt, error)
}

// NewFamily returns the plugin.Family serving s: its name and method,
// requests decoded strictly. The caller sets the record (Status, Since,
// Until, Witness), Codes, Needs and Uses.
func NewFamily(s Server) *plugin.Family {
	return &plugin.Family{Name: Family, Methods: map[string]plugin.Handler{MethodGet: plugin.Typed(s.Get)}}
}
