//go:build !wasip1

// Left out of wasip1 builds: this needs the plugin SDK (go-plugin, gRPC),
// which a WebAssembly pack built on the family clients never links.

package aienvelope

import (
	"context"

	"github.com/wophost/wophost/sdk/plugin"
)

// Server is what a plugin implements to serve aiEnvelope. Written against
// it, a missing method is the compiler's error rather than the
// conformance kit's. A result replayed from storage is returned with
// GenerateResult.Raw set, which keeps it byte for byte.
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
	methods := map[string]plugin.Handler{MethodGenerate: plugin.Typed(sendRaw(s.Generate))}
	if a, ok := s.(AwaitServer); ok {
		methods[MethodAwait] = plugin.Typed(sendRaw(a.Await))
	}
	return &plugin.Family{Name: Family, Methods: methods}
}

// sendRaw hands a result's Raw to the plugin as a json.RawMessage, which
// it sends untouched, so a stored result is not re-encoded on its way out.
func sendRaw[In any](fn func(context.Context, *plugin.Request, *In) (*GenerateResult, error)) func(context.Context, *plugin.Request, *In) (any, error) {
	return func(ctx context.Context, req *plugin.Request, in *In) (any, error) {
		res, err := fn(ctx, req, in)
		if err == nil && res != nil && res.Raw != nil {
			return res.Raw, nil
		}
		return res, err
	}
}
