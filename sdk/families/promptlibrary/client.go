package promptlibrary

import (
	"context"
	"encoding/json"

	"github.com/wophost/wophost/sdk/wop"
)

// Client calls the promptLibrary family. A nil *Client stands for a host
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

// Get returns the pinned prompt version named by req.PromptID.
func (c *Client) Get(ctx context.Context, req *GetRequest) (*Prompt, error) {
	if c == nil {
		return nil, wop.NotProvided(CapabilityGet)
	}
	if req == nil {
		return nil, wop.Errorf(wop.CodeValidation, "get: nil request").WithCapability(CapabilityGet)
	}
	var res Prompt
	if err := c.caller.Call(ctx, Family, MethodGet, req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
