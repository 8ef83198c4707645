package main

import (
	"context"
	"fmt"
	"path/filepath"

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

// List implements promptlibrary.Manager: from the index when the store
// has one, else from the records.
func (l *library) List(ctx context.Context, _ *plugin.Request, _ *promptlibrary.ListRequest) (*promptlibrary.ListResult, error) {
	st := l.current()
	if st.HasIndex() {
		names, err := st.ListIndex(ctx)
		if err != nil {
			return nil, storeError("", err)
		}
		return &promptlibrary.ListResult{Names: names}, nil
	}
	names, err := st.Names()
	if err != nil {
		return nil, storeError("", err)
	}
	out := []promptlibrary.NameSummary{}
	for _, n := range names {
		vs, err := st.Versions(n)
		if err != nil {
			return nil, storeError(n, err)
		}
		last := vs[len(vs)-1]
		out = append(out, promptlibrary.NameSummary{Name: n, Versions: len(vs), Last: last.Version, Digest: last.Digest})
	}
	return &promptlibrary.ListResult{Names: out}, nil
}

// Versions implements promptlibrary.Manager.
func (l *library) Versions(_ context.Context, _ *plugin.Request, in *promptlibrary.VersionsRequest) (*promptlibrary.VersionsResult, error) {
	vs, err := l.current().Versions(in.Name)
	if err != nil {
		return nil, storeError(in.Name, err)
	}
	return &promptlibrary.VersionsResult{Versions: vs}, nil
}

// Resolve implements promptlibrary.Manager.
func (l *library) Resolve(_ context.Context, _ *plugin.Request, in *promptlibrary.ResolveRequest) (*promptlibrary.Version, error) {
	pin, err := promptlibrary.ParsePin(in.PromptID)
	if err != nil {
		return nil, wop.Errorf(promptlibrary.CodePromptUnpinned, "%v", err).
			WithDetails(map[string]string{"promptId": in.PromptID})
	}
	v, err := l.current().Resolve(pin)
	if err != nil {
		return nil, storeError(in.PromptID, err)
	}
	return v, nil
}

// Verify implements promptlibrary.Manager.
func (l *library) Verify(_ context.Context, _ *plugin.Request, _ *promptlibrary.VerifyRequest) (*promptlibrary.VerifyResult, error) {
	st := l.current()
	rep, err := st.Verify()
	if err != nil {
		return nil, storeError("", err)
	}
	return &promptlibrary.VerifyResult{Store: st.Dir(), Report: *rep}, nil
}

// Reindex implements promptlibrary.Manager.
func (l *library) Reindex(ctx context.Context, _ *plugin.Request, _ *promptlibrary.ReindexRequest) (*promptlibrary.ReindexResult, error) {
	st := l.current()
	n, err := st.RebuildIndex(ctx)
	if err != nil {
		return nil, storeError("", fmt.Errorf("rebuild the index: %w", err))
	}
	return &promptlibrary.ReindexResult{Index: filepath.Join(st.Dir(), store.IndexFile), Versions: n}, nil
}
