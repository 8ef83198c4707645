package aienvelope

import (
	"context"

	"github.com/wophost/wophost/sdk/plugin"
)

// Server is what a plugin implements to serve aiEnvelope. Written against
// it, a missing method is the compiler's error rather than the
// conformance kit's.
type Server interface {
	Generate(ctx context.Context, req *plugin.Request, in *GenerateRequest) (*GenerateResult, error)
}

// AwaitServer is a Server that also serves await. NewFamily serves the
// method when s implements it; advertise the await facet (Family.Facets)
// while asynchronous generation is on.
type AwaitServer interface {
	Server
	Await(ctx context.Context, req *plugin.Request, in *AwaitRequest) (*GenerateResult, error)
}

// NewFamily returns the plugin.Family serving s: its name and methods,
// requests decoded strictly. The caller sets the record (Status, Since,
// Until, Witness), Facets, Codes, Needs and Uses.
func NewFamily(s Server) *plugin.Family {
	methods := map[string]plugin.Handler{MethodGenerate: plugin.Typed(s.Generate)}
	if a, ok := s.(AwaitServer); ok {
		methods[MethodAwait] = plugin.Typed(a.Await)
	}
	return &plugin.Family{Name: Family, Methods: methods}
}
