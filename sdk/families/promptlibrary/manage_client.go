package promptlibrary

import (
	"context"

	"github.com/wophost/wophost/sdk/wop"
)

// call sends one management call and decodes its answer into res.
func (c *Client) call(ctx context.Context, method string, req, res any) error {
	capability := "host." + Family + "." + method
	if c == nil {
		return wop.NotProvided(capability)
	}
	return c.caller.Call(ctx, Family, method, req, res)
}

// Publish publishes raw, the bytes of a .prompt file. Operator only.
func (c *Client) Publish(ctx context.Context, raw []byte) (*PublishResult, error) {
	var res PublishResult
	if err := c.call(ctx, MethodPublish, &PublishRequest{Raw: raw}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// List returns every prompt name. Operator only.
func (c *Client) List(ctx context.Context) ([]NameSummary, error) {
	var res ListResult
	if err := c.call(ctx, MethodList, &ListRequest{}, &res); err != nil {
		return nil, err
	}
	if res.Names == nil {
		res.Names = []NameSummary{}
	}
	return res.Names, nil
}

// Versions returns the versions of name in publication order. Operator
// only.
func (c *Client) Versions(ctx context.Context, name string) ([]Version, error) {
	var res VersionsResult
	if err := c.call(ctx, MethodVersions, &VersionsRequest{Name: name}, &res); err != nil {
		return nil, err
	}
	return res.Versions, nil
}

// Resolve returns the record of the pinned version promptID. Operator only.
func (c *Client) Resolve(ctx context.Context, promptID string) (*Version, error) {
	var res Version
	if err := c.call(ctx, MethodResolve, &ResolveRequest{PromptID: promptID}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Verify checks the whole store. Operator only.
func (c *Client) Verify(ctx context.Context) (*VerifyResult, error) {
	var res VerifyResult
	if err := c.call(ctx, MethodVerify, &VerifyRequest{}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Reindex rebuilds the store's index. Operator only.
func (c *Client) Reindex(ctx context.Context) (*ReindexResult, error) {
	var res ReindexResult
	if err := c.call(ctx, MethodReindex, &ReindexRequest{}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
