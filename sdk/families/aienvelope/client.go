package aienvelope

import (
	"context"
	"encoding/json"

	"github.com/wophost/wophost/sdk/wop"
)

// Client calls the aiEnvelope family. A nil *Client stands for a host that
// does not advertise the family.
type Client struct {
	caller   wop.Caller
	hasAwait bool
}

// NewClient returns a Client that calls through c. facets holds the keys of
// the family's advertisement record; a facet is advertised by the presence
// of its key, and the client refuses a call that needs an absent one before
// it leaves. A plugin calling back into the host, which is not shown the
// advertisement, passes nil: every call then goes to the host, which
// checks the facets itself. NewClient returns nil when c is nil.
func NewClient(c wop.Caller, facets map[string]json.RawMessage) *Client {
	if c == nil {
		return nil
	}
	_, await := facets[FacetAwait]
	if facets == nil {
		await = true
	}
	return &Client{caller: c, hasAwait: await}
}

// HasAwait reports whether the await facet is advertised.
func (c *Client) HasAwait() bool {
	return c != nil && c.hasAwait
}

// Generate runs one envelope. With req.Async it returns a pending result
// to collect with Await; that needs the await facet.
func (c *Client) Generate(ctx context.Context, req *GenerateRequest) (*GenerateResult, error) {
	if c == nil {
		return nil, wop.NotProvided(CapabilityGenerate)
	}
	if req == nil {
		return nil, wop.Errorf(wop.CodeValidation, "generate: nil request").WithCapability(CapabilityGenerate)
	}
	if req.Async && !c.hasAwait {
		// A pending envelope nobody can await would be lost work.
		return nil, wop.NotProvided(CapabilityAwait)
	}
	var res GenerateResult
	if err := c.caller.Call(ctx, Family, MethodGenerate, req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Await waits up to req.TimeoutMs for an async envelope. Running out of
// time is not an error: the result is then pending with TimedOut set.
func (c *Client) Await(ctx context.Context, req *AwaitRequest) (*GenerateResult, error) {
	if !c.HasAwait() {
		return nil, wop.NotProvided(CapabilityAwait)
	}
	if req == nil {
		return nil, wop.Errorf(wop.CodeValidation, "await: nil request").WithCapability(CapabilityAwait)
	}
	var res GenerateResult
	if err := c.caller.Call(ctx, Family, MethodAwait, req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
