//go:build !wasip1

// Left out of wasip1 builds: this needs the plugin SDK (go-plugin, gRPC),
// which a WebAssembly pack built on the family clients never links.

package agentruntime

import (
	"context"

	"github.com/wophost/wophost/sdk/plugin"
)

// Server is what a plugin implements to serve agentRuntime. Written
// against it, a missing method is the compiler's error rather than the
// conformance kit's.
type Server interface {
	Spawn(ctx context.Context, req *plugin.Request, in *SpawnRequest) (*SpawnResult, error)
	Delegate(ctx context.Context, req *plugin.Request, in *DelegateRequest) (*DelegateResult, error)
	Consensus(ctx context.Context, req *plugin.Request, in *ConsensusRequest) (*ConsensusResult, error)
	MessageSend(ctx context.Context, req *plugin.Request, in *MessageSendRequest) (*MessageSendResult, error)
}

// NewFamily returns the plugin.Family serving s: its name and methods,
// requests decoded strictly. The four methods always; instances too when
// s is an InstanceLister. The caller sets the record (Status, Since,
// Until, Witness), Codes, Needs and Uses; the family needs aiEnvelope.
func NewFamily(s Server) *plugin.Family {
	methods := map[string]plugin.Handler{
		MethodSpawn:       plugin.Typed(s.Spawn),
		MethodDelegate:    plugin.Typed(s.Delegate),
		MethodConsensus:   plugin.Typed(s.Consensus),
		MethodMessageSend: plugin.Typed(s.MessageSend),
	}
	if l, ok := s.(InstanceLister); ok {
		methods[MethodInstances] = plugin.Typed(l.Instances)
	}
	return &plugin.Family{Name: Family, Methods: methods}
}

// InstanceLister is what a plugin implements, beside Server, to show the
// operator its agent instances. A runtime that cannot list them leaves it
// out, and NewFamily then serves the four methods alone.
type InstanceLister interface {
	// Instances answers a page of the instances in spawn order, after
	// in.After, with the spawn quota and mailbox capacity in force. It
	// only reads. A limit out of range (InstancesRequest.PageSize) and an
	// After that names no instance are validation_error.
	Instances(ctx context.Context, req *plugin.Request, in *InstancesRequest) (*InstancesResult, error)
}
