//go:build !wasip1

// Left out of wasip1 builds: this needs the plugin SDK (go-plugin, gRPC),
// which a WebAssembly pack built on the family clients never links.

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

// NewFamily returns the plugin.Family serving s: its name and methods,
// requests decoded strictly. get always; the management methods too when s
// is a Manager. The caller sets the record (Status, Since, Until, Witness),
// Codes, Needs and Uses.
func NewFamily(s Server) *plugin.Family {
	methods := map[string]plugin.Handler{MethodGet: plugin.Typed(s.Get)}
	if m, ok := s.(Manager); ok {
		methods[MethodPublish] = plugin.Typed(m.Publish)
		methods[MethodList] = plugin.Typed(m.List)
		methods[MethodVersions] = plugin.Typed(m.Versions)
		methods[MethodResolve] = plugin.Typed(m.Resolve)
		methods[MethodVerify] = plugin.Typed(m.Verify)
		methods[MethodReindex] = plugin.Typed(m.Reindex)
	}
	return &plugin.Family{Name: Family, Methods: methods}
}

// Manager is what a plugin implements, beside Server, to let the operator
// manage its store (`host prompts`). A read-only store leaves it out, and
// NewFamily then serves get alone.
type Manager interface {
	// Publish stores in.Raw as a new immutable version: the header's
	// version, or the next integer. Identical bytes already published
	// answer the existing version with Existed; different bytes under an
	// existing version fail with CodePromptVersionConflict.
	Publish(ctx context.Context, req *plugin.Request, in *PublishRequest) (*PublishResult, error)
	// List returns every name with its version count and latest version.
	List(ctx context.Context, req *plugin.Request, in *ListRequest) (*ListResult, error)
	// Versions returns the versions of one name in publication order.
	Versions(ctx context.Context, req *plugin.Request, in *VersionsRequest) (*VersionsResult, error)
	// Resolve returns the record of a pinned version.
	Resolve(ctx context.Context, req *plugin.Request, in *ResolveRequest) (*Version, error)
	// Verify checks every stored version against its digest. It only
	// reads.
	Verify(ctx context.Context, req *plugin.Request, in *VerifyRequest) (*VerifyResult, error)
	// Reindex rebuilds the store's index from its records.
	Reindex(ctx context.Context, req *plugin.Request, in *ReindexRequest) (*ReindexResult, error)
}
