package agentruntime

import (
	"encoding/json"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// Family is the family name in the advertisement.
const Family = wop.FamilyAgentRuntime

// FamilyAgents is the family that advertising agentRuntime implies, and
// FacetManifestRuntime its facet that the host must then satisfy.
const (
	FamilyAgents         = wop.FamilyAgents
	FacetManifestRuntime = "manifestRuntime"
)

// Method names on the wire.
const (
	MethodSpawn       = "spawn"
	MethodDelegate    = "delegate"
	MethodConsensus   = "consensus"
	MethodMessageSend = "messageSend"
)

// Capability names carried by capability_not_provided errors.
const (
	CapabilitySpawn       = "host." + Family + "." + MethodSpawn
	CapabilityDelegate    = "host." + Family + "." + MethodDelegate
	CapabilityConsensus   = "host." + Family + "." + MethodConsensus
	CapabilityMessageSend = "host." + Family + "." + MethodMessageSend
)

// Error codes of the family. They arrive as wop.Error.Code; a failure in a
// family the agent used is carried under details.cause, and the error is
// retryable when that failure is (see wop.Error.WithCause).
const (
	CodeAgentNotFound            = "agent_not_found"
	CodeAgentSpawnQuotaExhausted = "agent_spawn_quota_exhausted"
	CodeAgentBudgetExceeded      = "agent_budget_exceeded"
	CodeAgentTimeout             = "agent_timeout"
	CodeMailboxFull              = "mailbox_full" // retryable
	CodeConsensusFailed          = "consensus_failed"
)

// Delegation strategies.
const (
	StrategyBestMatch    = "best-match"
	StrategyLoadBalanced = "load-balanced"
)

// Consensus strategies.
const (
	StrategyMajority  = "majority"
	StrategyQuorum    = "quorum"
	StrategyUnanimous = "unanimous"
)

// SpawnRequest is the body of spawn. Set exactly one of ManifestID (a
// manifest installed from a pack) and Manifest (an inline manifest).
type SpawnRequest struct {
	ManifestID string          `json:"manifestId,omitempty"`
	Manifest   json.RawMessage `json:"manifest,omitempty"`
	// Config is instance configuration passed to the runtime as is.
	Config         json.RawMessage `json:"config,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey"`
}

// SpawnConfig is the instance configuration spawn accepts in Config.
// Limits may only tighten the manifest's limits: each field that is set
// replaces the manifest's value when it is smaller.
type SpawnConfig struct {
	Limits *Limits `json:"limits,omitempty"`
}

// SpawnResult identifies a spawned agent instance. ManifestDigest is
// "sha256:<hex>" of the canonical manifest it runs.
type SpawnResult struct {
	AgentInstanceID string    `json:"agentInstanceId"`
	SpawnedAt       time.Time `json:"spawnedAt"`
	ManifestDigest  string    `json:"manifestDigest"`
}

// DelegateRequest is the body of delegate: hand Task to one of Agents.
type DelegateRequest struct {
	// Task is the task input, any JSON value, given to the selected agent.
	Task json.RawMessage `json:"task"`
	// Agents are the candidate agent ids, in preference order.
	Agents    []string `json:"agents"`
	Strategy  string   `json:"strategy,omitempty"`
	TimeoutMs int64    `json:"timeoutMs,omitempty"`
	// EscalationThreshold, in [0, 1], is the best-match score below which
	// the runtime escalates: when the top candidate's score is lower, no
	// agent runs and the result has status "escalated". A pointer, so
	// that zero can be sent; nil never escalates.
	EscalationThreshold *float64 `json:"escalationThreshold,omitempty"`
}

// Delegation statuses. A delegation whose best candidate scores below
// the escalation threshold runs no agent and reports StatusEscalated.
const (
	StatusCompleted = "completed"
	StatusEscalated = "escalated"
)

// DelegateResult reports a delegation. Output is the selected agent's
// answer, when it produced one.
type DelegateResult struct {
	DelegationID    string          `json:"delegationId"`
	SelectedAgentID string          `json:"selectedAgentId"`
	Status          string          `json:"status"`
	Output          json.RawMessage `json:"output,omitempty"`
	Escalated       bool            `json:"escalated,omitempty"`
}

// ConsensusRequest is the body of consensus: Participants vote on Proposal.
type ConsensusRequest struct {
	// Proposal is what the participants vote on, any JSON value.
	Proposal json.RawMessage `json:"proposal"`
	// Participants are agent ids; ballots come back in this order.
	Participants []string `json:"participants"`
	Strategy     string   `json:"strategy,omitempty"`
	// Threshold is the fraction of participants, in (0, 1], that must
	// agree under StrategyQuorum.
	Threshold *float64 `json:"threshold,omitempty"`
	MaxRounds int      `json:"maxRounds,omitempty"`
}

// ConsensusResult reports a consensus run. Agreement is the fraction of
// participants that backed the outcome; Decision is set when it converged.
type ConsensusResult struct {
	Converged bool            `json:"converged"`
	Rounds    int             `json:"rounds"`
	Agreement float64         `json:"agreement"`
	Decision  json.RawMessage `json:"decision,omitempty"`
	// Ballots are the final round's votes in participant order, not
	// arrival order, so that a replay is deterministic.
	Ballots []Ballot `json:"ballots"`
}

// MarshalJSON always writes "ballots" as an array, never null, because the
// contract makes it a list.
func (r ConsensusResult) MarshalJSON() ([]byte, error) {
	type plain ConsensusResult // no MarshalJSON method, so no recursion
	if r.Ballots == nil {
		r.Ballots = []Ballot{}
	}
	return json.Marshal(plain(r))
}

// Ballot is one participant's vote. Participant is the index into
// ConsensusRequest.Participants and AgentID the instance that voted.
type Ballot struct {
	Participant int    `json:"participant"`
	AgentID     string `json:"agentId"`
	// Vote is the participant's answer, any JSON value.
	Vote      json.RawMessage `json:"vote,omitempty"`
	Rationale string          `json:"rationale,omitempty"`
	// Error is set, and Vote absent, when the participant could not vote
	// (its run failed); such a ballot counts as an abstention.
	Error *wop.Error `json:"error,omitempty"`
}

// MessageSendRequest is the body of messageSend. Delivery is at least once
// and deduplicated by IdempotencyKey.
type MessageSendRequest struct {
	FromAgentID string `json:"fromAgentId"`
	ToAgentID   string `json:"toAgentId"`
	Channel     string `json:"channel"`
	// Content is the message body, any JSON value.
	Content        json.RawMessage `json:"content"`
	IdempotencyKey string          `json:"idempotencyKey"`
}

// MessageSendResult acknowledges a message queued into the recipient's
// mailbox.
type MessageSendResult struct {
	MessageID string    `json:"messageId"`
	SentAt    time.Time `json:"sentAt"`
}
