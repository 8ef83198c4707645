package main

import (
	"context"
	"errors"

	"github.com/wophost/wophost/plugins/promptlib/store"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// The operator's methods (promptlibrary.Manager). The host lets only the
// operator call them, so they need no check of the caller here.

// Publish implements promptlibrary.Manager.
func (l *library) Publish(ctx context.Context, _ *plugin.Request, in *promptlibrary.PublishRequest) (*promptlibrary.PublishResult, error) {
	res, err := l.current().Publish(ctx, in.Raw)
	if err != nil {
		return nil, storeError("", err)
	}
	return &promptlibrary.PublishResult{Version: res.Version, Existed: res.Existed}, nil
}

// List implements promptlibrary.Manager.
func (l *library) List(ctx context.Context, _ *plugin.Request, _ *promptlibrary.ListRequest) (*promptlibrary.ListResult, error) {
	names, err := l.current().List(ctx)
	if err != nil {
		return nil, storeError("", err)
	}
	return &promptlibrary.ListResult{Names: names}, nil
}

// Versions implements promptlibrary.Manager.
func (l *library) Versions(ctx context.Context, _ *plugin.Request, in *promptlibrary.VersionsRequest) (*promptlibrary.VersionsResult, error) {
	vs, err := l.current().Versions(ctx, in.Name)
	if err != nil {
		return nil, storeError(in.Name, err)
	}
	return &promptlibrary.VersionsResult{Versions: vs}, nil
}

// Resolve implements promptlibrary.Manager.
func (l *library) Resolve(ctx context.Context, _ *plugin.Request, in *promptlibrary.ResolveRequest) (*promptlibrary.Version, error) {
	pin, err := promptlibrary.ParsePin(in.PromptID)
	if err != nil {
		return nil, wop.Errorf(promptlibrary.CodePromptUnpinned, "%v", err).
			WithDetails(map[string]string{"promptId": in.PromptID})
	}
	v, err := l.current().Resolve(ctx, pin)
	if err != nil {
		return nil, storeError(in.PromptID, err)
	}
	return v, nil
}

// Verify implements promptlibrary.Manager.
func (l *library) Verify(ctx context.Context, _ *plugin.Request, _ *promptlibrary.VerifyRequest) (*promptlibrary.VerifyResult, error) {
	st := l.current()
	rep, err := st.Verify(ctx)
	if err != nil {
		return nil, storeError("", err)
	}
	return &promptlibrary.VerifyResult{Store: st.Where(), Report: *rep}, nil
}

// Reindex implements promptlibrary.Manager.
func (l *library) Reindex(ctx context.Context, _ *plugin.Request, _ *promptlibrary.ReindexRequest) (*promptlibrary.ReindexResult, error) {
	index, n, err := l.current().Reindex(ctx)
	if errors.Is(err, store.ErrNoIndex) {
		return nil, wop.Errorf(wop.CodeValidation, "%s: %v", l.current().Where(), err)
	}
	if err != nil {
		return nil, storeError("", err)
	}
	return &promptlibrary.ReindexResult{Index: index, Versions: n}, nil
}
