// Command council is the example agent pack: two agents, a reviewer and a
// maintainer, each under a system prompt the pack pins in the prompt
// library, and a node that has them vote on a proposal through
// agentRuntime.consensus. The host installs the agents from pack.json;
// the node only names them.
package main

import (
	_ "embed"
	"encoding/json"

	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/pack"
)

//go:embed pack.json
var manifest []byte

// council lists the agents that vote, in ballot order.
var council = []string{"council-reviewer", "council-maintainer"}

type decideInput struct {
	Proposal  string `json:"proposal"`
	MaxRounds int    `json:"maxRounds,omitempty"`
}

// decide spawns each agent under a fixed idempotency key, so that every
// run reuses the same instances (and their mailboxes), then asks for a
// unanimous vote.
func decide(ctx *pack.Ctx, in *decideInput) (*agentruntime.ConsensusResult, error) {
	ids := make([]string, len(council))
	for i, id := range council {
		res, err := ctx.AgentRuntime.Spawn(ctx, &agentruntime.SpawnRequest{ManifestID: id, IdempotencyKey: "community.wophost.council/" + id})
		if err != nil {
			return nil, err
		}
		ids[i] = res.AgentInstanceID
	}
	proposal, err := json.Marshal(in.Proposal)
	if err != nil {
		return nil, err
	}
	rounds := in.MaxRounds
	if rounds == 0 {
		rounds = 2
	}
	return ctx.AgentRuntime.Consensus(ctx, &agentruntime.ConsensusRequest{
		Proposal: proposal, Participants: ids, Strategy: agentruntime.StrategyUnanimous, MaxRounds: rounds,
	})
}

func main() {
	pack.Serve(&pack.Pack{
		Manifest: manifest,
		Nodes:    map[string]pack.Node{"council.decide": pack.TypedNode(decide)},
	})
}
