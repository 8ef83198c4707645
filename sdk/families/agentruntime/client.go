package agentruntime

import (
	"context"
	"encoding/json"

	"github.com/wophost/wophost/sdk/wop"
)

// Client calls the agentRuntime family. A nil *Client stands for a host
// that does not advertise the family.
type Client struct {
	caller wop.Caller
}

// NewClient returns a Client that calls through c. facets holds the keys of
// the family's advertisement record; the family defines no facets yet, and
// the parameter keeps every family's constructor alike. NewClient returns
// nil when c is nil.
func NewClient(c wop.Caller, facets map[string]json.RawMessage) *Client {
	if c == nil {
		return nil
	}
	return &Client{caller: c}
}

// Spawn starts an agent instance from a manifest.
func (c *Client) Spawn(ctx context.Context, req *SpawnRequest) (*SpawnResult, error) {
	var res SpawnResult
	if err := c.call(ctx, MethodSpawn, CapabilitySpawn, req, req == nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Delegate hands a task to one of several agents.
func (c *Client) Delegate(ctx context.Context, req *DelegateRequest) (*DelegateResult, error) {
	var res DelegateResult
	if err := c.call(ctx, MethodDelegate, CapabilityDelegate, req, req == nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Consensus has several agents vote on a proposal.
func (c *Client) Consensus(ctx context.Context, req *ConsensusRequest) (*ConsensusResult, error) {
	var res ConsensusResult
	if err := c.call(ctx, MethodConsensus, CapabilityConsensus, req, req == nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// MessageSend queues a message into an agent's mailbox.
func (c *Client) MessageSend(ctx context.Context, req *MessageSendRequest) (*MessageSendResult, error) {
	var res MessageSendResult
	if err := c.call(ctx, MethodMessageSend, CapabilityMessageSend, req, req == nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// call holds the checks every method shares. nilReq is passed separately
// because a typed nil pointer inside req (an any) is not == nil.
func (c *Client) call(ctx context.Context, method, capability string, req any, nilReq bool, res any) error {
	if c == nil {
		return wop.NotProvided(capability)
	}
	if nilReq {
		return wop.Errorf(wop.CodeValidation, "%s: nil request", method).WithCapability(capability)
	}
	return c.caller.Call(ctx, Family, method, req, res)
}
