package main

import (
	"encoding/json"
	"fmt"

	"github.com/wophost/wophost/examples/plugins/kv/kvapi"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
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

// describe asks a language model about a stored value, under the system
// prompt the pack pins in its lock map ("kvdemo/describe" in pack.json's
// prompts). The host refuses this node before it runs unless aiEnvelope and
// promptLibrary are advertised, so both ctx fields are set when it runs.
func describe(ctx *pack.Ctx, in *keyOnly) (map[string]string, error) {
	var got kvapi.GetResult
	if err := ctx.Call(kvapi.Family, kvapi.MethodGet, kvapi.GetRequest{Key: in.Key}, &got); err != nil {
		return nil, err
	}
	prompt, err := ctx.PromptLibrary.Get(ctx, &promptlibrary.GetRequest{PromptID: "kvdemo/describe"})
	if err != nil {
		return nil, err
	}
	res, err := ctx.AIEnvelope.Generate(ctx, &aienvelope.GenerateRequest{
		EnvelopeType:   prompt.EnvelopeType,
		SystemPrompt:   prompt.SystemPrompt,
		UserMessage:    fmt.Sprintf("%s = {{value}}", got.Key),
		Variables:      map[string]any{"value": got.Value},
		IdempotencyKey: ctx.Run.RunID,
	})
	if err != nil {
		return nil, err
	}
	return map[string]string{"key": got.Key, "prompt": prompt.PromptID + " " + prompt.Digest, "description": res.Text}, nil
}

// toolboxServer is the serverId of the demo MCP server in host.hcl.example.
const toolboxServer = "toolbox"

// wordcount counts the words of a stored value with an MCP tool and
// returns the tool's result as the server sent it.
func wordcount(ctx *pack.Ctx, in *keyOnly) (json.RawMessage, error) {
	var got kvapi.GetResult
	if err := ctx.Call(kvapi.Family, kvapi.MethodGet, kvapi.GetRequest{Key: in.Key}, &got); err != nil {
		return nil, err
	}
	args, err := json.Marshal(map[string]string{"text": got.Value})
	if err != nil {
		return nil, err
	}
	return ctx.MCP.CallTool(ctx, &mcp.CallToolRequest{ServerID: toolboxServer, Name: "wordcount", Arguments: args})
}
