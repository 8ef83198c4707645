package main

import (
	"fmt"

	"github.com/wophost/wophost/examples/plugins/kv/kvapi"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/pack"
)

type keyValue struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type keyOnly struct {
	Key string `json:"key"`
}

// remember stores the value, then reads it back, so the output shows what
// the store now holds.
func remember(ctx *pack.Ctx, in *keyValue) (*kvapi.GetResult, error) {
	var put kvapi.PutResult
	if err := ctx.Call(kvapi.Family, kvapi.MethodPut, kvapi.PutRequest(*in), &put); err != nil {
		return nil, err
	}
	var got kvapi.GetResult
	if err := ctx.Call(kvapi.Family, kvapi.MethodGet, kvapi.GetRequest{Key: in.Key}, &got); err != nil {
		return nil, err
	}
	return &got, nil
}

func recall(ctx *pack.Ctx, in *keyOnly) (*kvapi.GetResult, error) {
	var got kvapi.GetResult
	err := ctx.Call(kvapi.Family, kvapi.MethodGet, kvapi.GetRequest{Key: in.Key}, &got)
	return &got, err
}

func forget(ctx *pack.Ctx, in *keyOnly) (*kvapi.DeleteResult, error) {
	var res kvapi.DeleteResult
	err := ctx.Call(kvapi.Family, kvapi.MethodDelete, kvapi.DeleteRequest{Key: in.Key}, &res)
	return &res, err
}

// describe asks a language model about a stored value. The host refuses
// this node before it runs unless aiEnvelope is advertised, so ctx's
// field is set whenever the node runs.
func describe(ctx *pack.Ctx, in *keyOnly) (map[string]string, error) {
	var got kvapi.GetResult
	if err := ctx.Call(kvapi.Family, kvapi.MethodGet, kvapi.GetRequest{Key: in.Key}, &got); err != nil {
		return nil, err
	}
	res, err := ctx.AIEnvelope.Generate(ctx, &aienvelope.GenerateRequest{
		EnvelopeType:   "kvdemo.describe",
		SystemPrompt:   "Describe the value in one sentence.",
		UserMessage:    fmt.Sprintf("%s = {{value}}", got.Key),
		Variables:      map[string]any{"value": got.Value},
		IdempotencyKey: ctx.Run.RunID,
	})
	if err != nil {
		return nil, err
	}
	return map[string]string{"key": got.Key, "description": res.Text}, nil
}
