// Command wasmdemo is the example WebAssembly node pack: one node that
// greets by name, draws a lucky number from the host's random source and
// asks aiEnvelope for a fortune. Build it with make build, or:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o bin/wasmdemo.wasm .
package main

import (
	_ "embed"
	"encoding/binary"
	"time"

	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/wasmpack"
)

//go:embed pack.json
var manifest []byte

// fortuneInput is the node's input, as schemas/fortune.input.json has it.
type fortuneInput struct {
	Name string `json:"name"`
}

// fortuneOutput is the node's output.
type fortuneOutput struct {
	Greeting    string `json:"greeting"`
	LuckyNumber int    `json:"luckyNumber"`
	At          string `json:"at"`
	Text        string `json:"text"`
}

// fortune reads the time and the random bytes from the host, not from
// time.Now or crypto/rand, so that a replay of the run gives the same
// answer. aiEnvelope is a required peer dependency: the host does not run
// the node unless it advertises the family, so ctx.AIEnvelope is set.
func fortune(ctx *wasmpack.Ctx, in *fortuneInput) (*fortuneOutput, error) {
	now := ctx.Now()
	var draw [4]byte
	ctx.Random(draw[:])
	lucky := int(binary.LittleEndian.Uint32(draw[:])%100) + 1
	res, err := ctx.AIEnvelope.Generate(ctx, &aienvelope.GenerateRequest{
		EnvelopeType:   "wasmdemo.fortune",
		SystemPrompt:   "You tell short, friendly fortunes. Answer in one sentence.",
		UserMessage:    "A fortune for {{name}}, whose lucky number is {{lucky}}.",
		Variables:      map[string]any{"name": in.Name, "lucky": lucky},
		IdempotencyKey: ctx.Run.RunID + "/" + ctx.Run.NodeID,
	})
	if err != nil {
		return nil, err
	}
	ctx.Logger.Info("fortune told", "lucky", lucky)
	return &fortuneOutput{
		Greeting:    "Hello, " + in.Name + "!",
		LuckyNumber: lucky,
		At:          now.Format(time.RFC3339),
		Text:        res.Text,
	}, nil
}

// init serves the pack: a WebAssembly reactor's main never runs, its
// package init functions do.
func init() {
	wasmpack.Serve(&wasmpack.Pack{
		Manifest: manifest,
		Nodes:    map[string]wasmpack.Node{"wasmdemo.fortune": wasmpack.TypedNode(fortune)},
	})
}

func main() {}
