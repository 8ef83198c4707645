package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/wop"
)

// familyAgentRuntime is BADPLUGIN_FAMILY's value that makes the plugin
// serve agentRuntime, running its agents through the host's
// aiEnvelope.generate. Its rules to break:
//
//   - ar-advertised: the family does not say it needs aiEnvelope.
//   - ar-spawn: a spawn repeated under its key spawns a second instance.
//   - ar-delegate: delegate selects the first agent, whatever its skills.
//   - ar-consensus: ballots come in reverse participant order.
//   - ar-message: messageSend to an unknown agent succeeds.
//   - ar-mailbox: a full mailbox is refused as not retryable.
const familyAgentRuntime = "agentRuntime"

// arMailboxCapacity is how many messages an agent's mailbox holds.
const arMailboxCapacity = 2

// agent is a spawned instance of the agentRuntime mode.
type agent struct {
	id       string
	manifest agentruntime.Manifest
	// inbox counts the messages sent to the agent.
	inbox int
}

// arNeeds lists the families agentRuntime needs.
func (s *server) arNeeds() []string {
	if s.breaks("ar-advertised") {
		return nil
	}
	return []string{wop.FamilyAIEnvelope}
}

// arInvoke serves the agentRuntime family with call, the call context
// it was invoked with.
func (s *server) arInvoke(ctx context.Context, method string, payload []byte, call wop.CallContext) ([]byte, error) {
	switch method {
	case agentruntime.MethodSpawn:
		var req agentruntime.SpawnRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, wop.Errorf(wop.CodeValidation, "spawn: %v", err)
		}
		return s.arSpawn(req)
	case agentruntime.MethodDelegate:
		var req agentruntime.DelegateRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, wop.Errorf(wop.CodeValidation, "delegate: %v", err)
		}
		return s.arDelegate(ctx, req, call)
	case agentruntime.MethodConsensus:
		var req agentruntime.ConsensusRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, wop.Errorf(wop.CodeValidation, "consensus: %v", err)
		}
		return s.arConsensus(ctx, req, call)
	case agentruntime.MethodMessageSend:
		var req agentruntime.MessageSendRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, wop.Errorf(wop.CodeValidation, "messageSend: %v", err)
		}
		return s.arMessageSend(req)
	}
	return nil, wop.Errorf(wop.CodeNotFound, "no method %s", method).WithCapability("host." + agentruntime.Family + "." + method)
}

func (s *server) arSpawn(req agentruntime.SpawnRequest) ([]byte, error) {
	var m agentruntime.Manifest
	if err := json.Unmarshal(req.Manifest, &m); err != nil || m.ID == "" {
		return nil, wop.Errorf(wop.CodeValidation, "spawn: the manifest is not valid")
	}
	if _, err := promptlibrary.ParsePin(m.SystemPromptRef); err != nil {
		return nil, wop.Errorf(wop.CodeValidation, "spawn: systemPromptRef: %v", err)
	}
	digest, err := m.Digest()
	if err != nil {
		return nil, wop.Errorf(wop.CodeValidation, "spawn: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.spawned[req.IdempotencyKey]
	if !ok || s.breaks("ar-spawn") {
		s.next++
		id = fmt.Sprintf("agent-%d", s.next)
		s.spawned[req.IdempotencyKey] = id
		s.agents[id] = &agent{id: id, manifest: m}
	}
	return json.Marshal(agentruntime.SpawnResult{AgentInstanceID: id, SpawnedAt: time.Now().UTC(), ManifestDigest: digest})
}

// arAgents returns the agents named ids, or agent_not_found.
func (s *server) arAgents(ids []string) ([]*agent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*agent, 0, len(ids))
	for _, id := range ids {
		a, ok := s.agents[id]
		if !ok {
			return nil, wop.Errorf(agentruntime.CodeAgentNotFound, "no agent %s", id)
		}
		out = append(out, a)
	}
	return out, nil
}

// arAsk has agent a answer prompt through the host's aiEnvelope.generate.
func (s *server) arAsk(ctx context.Context, a *agent, call wop.CallContext, prompt string) (string, error) {
	call.Caller = "agent:" + a.id
	var res struct {
		Text string `json:"text"`
	}
	req := map[string]any{"envelopeType": "badplugin.agent", "userMessage": prompt, "idempotencyKey": fmt.Sprint("badplugin-", time.Now().UnixNano())}
	if err := s.host.Call(wop.WithCallContext(ctx, call), wop.FamilyAIEnvelope, "generate", req, &res); err != nil {
		return "", err
	}
	return res.Text, nil
}

func (s *server) arDelegate(ctx context.Context, req agentruntime.DelegateRequest, call wop.CallContext) ([]byte, error) {
	agents, err := s.arAgents(req.Agents)
	if err != nil {
		return nil, err
	}
	if len(agents) == 0 {
		return nil, wop.Errorf(wop.CodeValidation, "delegate: no agents")
	}
	task := strings.ToLower(string(req.Task))
	best, bestScore := agents[0], -1
	for _, a := range agents {
		score := 0
		for _, sk := range a.manifest.Skills {
			for _, w := range append([]string{sk.ID}, sk.Tags...) {
				if strings.Contains(task, strings.ToLower(w)) {
					score++
				}
			}
		}
		if score > bestScore && !s.breaks("ar-delegate") {
			best, bestScore = a, score
		}
	}
	text, err := s.arAsk(ctx, best, call, string(req.Task))
	if err != nil {
		return nil, err
	}
	out, _ := json.Marshal(text)
	s.mu.Lock()
	s.next++
	n := s.next
	s.mu.Unlock()
	return json.Marshal(agentruntime.DelegateResult{DelegationID: fmt.Sprintf("delegation-%d", n), SelectedAgentID: best.id,
		Status: agentruntime.StatusCompleted, Output: out})
}

func (s *server) arConsensus(ctx context.Context, req agentruntime.ConsensusRequest, call wop.CallContext) ([]byte, error) {
	agents, err := s.arAgents(req.Participants)
	if err != nil {
		return nil, err
	}
	res := agentruntime.ConsensusResult{Rounds: 1}
	counts := map[string]int{}
	for i, a := range agents {
		text, err := s.arAsk(ctx, a, call, "Vote on "+string(req.Proposal))
		if err != nil {
			return nil, err
		}
		var v struct {
			Vote      json.RawMessage `json:"vote"`
			Rationale string          `json:"rationale"`
		}
		_ = json.Unmarshal([]byte(text), &v)
		res.Ballots = append(res.Ballots, agentruntime.Ballot{Participant: i, AgentID: a.id, Vote: v.Vote, Rationale: v.Rationale})
		counts[string(v.Vote)]++
	}
	var top string
	for v, n := range counts {
		if n > counts[top] {
			top = v
		}
	}
	n := len(agents)
	res.Agreement = float64(counts[top]) / float64(n)
	switch req.Strategy {
	case agentruntime.StrategyUnanimous:
		res.Converged = counts[top] == n
	default:
		res.Converged = 2*counts[top] > n
	}
	if res.Converged {
		res.Decision = json.RawMessage(top)
	}
	if s.breaks("ar-consensus") {
		slices.Reverse(res.Ballots)
	}
	return json.Marshal(res)
}

func (s *server) arMessageSend(req agentruntime.MessageSendRequest) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.messages[req.IdempotencyKey]; ok && req.IdempotencyKey != "" {
		return json.Marshal(agentruntime.MessageSendResult{MessageID: id, SentAt: time.Now().UTC()})
	}
	to, ok := s.agents[req.ToAgentID]
	if _, from := s.agents[req.FromAgentID]; !from || !ok {
		if !s.breaks("ar-message") {
			return nil, wop.Errorf(agentruntime.CodeAgentNotFound, "no agent %s", req.ToAgentID)
		}
		return json.Marshal(agentruntime.MessageSendResult{MessageID: "lost", SentAt: time.Now().UTC()})
	}
	if to.inbox >= arMailboxCapacity {
		return nil, wop.Errorf(agentruntime.CodeMailboxFull, "the mailbox of %s is full", to.id).WithRetryable(!s.breaks("ar-mailbox"))
	}
	to.inbox++
	s.next++
	id := fmt.Sprintf("message-%d", s.next)
	s.messages[req.IdempotencyKey] = id
	return json.Marshal(agentruntime.MessageSendResult{MessageID: id, SentAt: time.Now().UTC()})
}
