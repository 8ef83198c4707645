// Package runtime serves the four agentRuntime methods (spawn, delegate,
// consensus, messageSend) on top of the durable store, the routing and
// consensus rules and the agent loop, and the operator's instances. Every
// agent step reaches the host through the wop.Caller the request brings.
//
// # Manifests
//
// spawn takes the manifest itself: {manifest} inline, or {manifestId,
// manifest} where the host has put the canonical manifest of its registry
// entry beside the id. A spawn with only a manifestId is refused with
// agent_not_found, because the registry lives in the host. The runtime
// validates the manifest again, digests it, and stores it with the
// instance, so that instances survive restarts unchanged.
//
// A handoff target names a manifest id; it runs as the most recently
// spawned instance of that manifest, which must exist.
//
// # Mailboxes
//
// messageSend stores the message in the recipient's mailbox before it
// answers. Host-service calls need a node run in flight, so an agent reads
// its mailbox when it next runs: at the start of a delegation or ballot,
// the runtime claims every queued message of the instance (oldest first)
// and places them before the task, one user message each. They are
// acknowledged when the run ends with an answer and go back to the
// mailbox when it fails, or when the process dies mid-run: delivery is at
// least once.
//
// # Agent identity on callbacks
//
// Each host-service call an agent run makes carries, in its call context,
// Caller = "agent:<agentInstanceId>@<manifestDigest>", so that the host
// can look up the manifest and enforce its toolAllowlist.
package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/plugins/agentrt/consensus"
	"github.com/wophost/wophost/plugins/agentrt/loop"
	"github.com/wophost/wophost/plugins/agentrt/route"
	"github.com/wophost/wophost/plugins/agentrt/store"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/wop"
)

// Settings configure a Service.
type Settings struct {
	// Defaults are the limits of a run whose manifest sets none; Ceiling
	// caps every run (zero fields do not cap).
	Defaults loop.Limits
	Ceiling  loop.Limits
	// MailboxCapacity bounds the queued messages of each instance.
	MailboxCapacity int
	// SpawnQuota bounds the number of instances; 0 means no bound.
	SpawnQuota int
	// MaxRounds caps consensus maxRounds.
	MaxRounds int
	// MaxMessageBytes bounds the content of one message.
	MaxMessageBytes int
	// MaxCandidates bounds the agents of one delegate or consensus call.
	MaxCandidates int
}

// DefaultSettings returns the settings used where the configuration is
// silent.
func DefaultSettings() Settings {
	return Settings{
		Defaults:        loop.DefaultLimits(),
		MailboxCapacity: 64,
		SpawnQuota:      256,
		MaxRounds:       5,
		MaxMessageBytes: 64 << 10,
		MaxCandidates:   32,
	}
}

// Service serves the family.
type Service struct {
	store    store.Backend
	settings Settings
	// envelopeType is sent with every generate call the agents make.
	envelopeType string
}

// New returns a Service over an open store.
func New(st store.Backend, s Settings) *Service {
	return &Service{store: st, settings: s, envelopeType: "agentRuntime.turn"}
}

// Spawn starts an agent instance.
func (s *Service) Spawn(ctx context.Context, req *agentruntime.SpawnRequest) (*agentruntime.SpawnResult, error) {
	if strings.TrimSpace(req.IdempotencyKey) == "" {
		return nil, invalid("idempotencyKey", "is required")
	}
	if len(req.Manifest) == 0 || bytes.Equal(bytes.TrimSpace(req.Manifest), []byte("null")) {
		if req.ManifestID == "" {
			return nil, invalid("manifest", "one of manifestId and manifest is required")
		}
		return nil, wop.Errorf(agentruntime.CodeAgentNotFound,
			"agent manifest %q is not known to the runtime: the host passes the manifest with its id", req.ManifestID)
	}
	m, err := agentruntime.ParseManifest(req.Manifest)
	if err != nil {
		return nil, manifestInvalid(err)
	}
	if req.ManifestID != "" && req.ManifestID != m.ID {
		return nil, invalid("manifestId", fmt.Sprintf("%q does not match the manifest's id %q", req.ManifestID, m.ID))
	}
	var cfg agentruntime.SpawnConfig
	if len(req.Config) > 0 && !bytes.Equal(bytes.TrimSpace(req.Config), []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(req.Config))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return nil, invalid("config", err.Error())
		}
		if err := cfg.Limits.Validate(); err != nil {
			var me *agentruntime.ManifestError
			if errors.As(err, &me) && len(me.Problems) > 0 {
				return nil, invalid("config/limits"+me.Problems[0].Pointer, me.Problems[0].Message)
			}
			return nil, invalid("config/limits", err.Error())
		}
	}
	canonical, err := m.Canonical()
	if err != nil {
		return nil, wop.Errorf(wop.CodeInternal, "canonical manifest: %v", err)
	}
	digest, err := m.Digest()
	if err != nil {
		return nil, wop.Errorf(wop.CodeInternal, "manifest digest: %v", err)
	}
	cfgJSON, _ := json.Marshal(cfg)
	inst, _, err := s.store.CreateInstance(ctx, store.NewInstance{
		ManifestID: m.ID, ManifestDigest: digest, Manifest: canonical, Config: cfgJSON,
		IdempotencyKey: req.IdempotencyKey, RequestDigest: sum(digest, string(cfgJSON)),
	}, s.settings.SpawnQuota)
	switch {
	case errors.Is(err, store.ErrSpawnQuota):
		return nil, wop.Errorf(agentruntime.CodeAgentSpawnQuotaExhausted, "%v", err)
	case errors.Is(err, store.ErrIdempotencyMismatch):
		return nil, wop.Errorf(wop.CodeIdempotencyKeyMismatch, "%v", err)
	case err != nil:
		return nil, storeError(err)
	}
	return &agentruntime.SpawnResult{AgentInstanceID: inst.ID, SpawnedAt: inst.SpawnedAt, ManifestDigest: inst.ManifestDigest}, nil
}

// instance is a loaded instance with its parsed manifest and limits.
type instance struct {
	rec      store.Instance
	manifest *agentruntime.Manifest
	limits   loop.Limits
}

func (s *Service) load(ctx context.Context, field, id string) (*instance, error) {
	rec, err := s.store.Instance(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, wop.Errorf(agentruntime.CodeAgentNotFound, "%s: no agent instance %q", field, id)
	}
	if err != nil {
		return nil, storeError(err)
	}
	m, err := agentruntime.ParseManifest(rec.Manifest)
	if err != nil {
		return nil, wop.Errorf(wop.CodeInternal, "stored manifest of %s: %v", id, err)
	}
	var cfg agentruntime.SpawnConfig
	if len(rec.Config) > 0 {
		if err := json.Unmarshal(rec.Config, &cfg); err != nil {
			return nil, wop.Errorf(wop.CodeInternal, "stored config of %s: %v", id, err)
		}
	}
	return &instance{rec: rec, manifest: m, limits: loop.Resolve(s.settings.Defaults, m.Limits, cfg.Limits, s.settings.Ceiling)}, nil
}

func (s *Service) loadAll(ctx context.Context, field string, ids []string) ([]*instance, error) {
	if len(ids) == 0 {
		return nil, invalid(field, "at least one agent is required")
	}
	if s.settings.MaxCandidates > 0 && len(ids) > s.settings.MaxCandidates {
		return nil, invalid(field, fmt.Sprintf("has %d agents, over the limit of %d", len(ids), s.settings.MaxCandidates))
	}
	out := make([]*instance, len(ids))
	seen := map[string]int{}
	for i, id := range ids {
		if j, dup := seen[id]; dup {
			return nil, invalid(fmt.Sprintf("%s/%d", field, i), fmt.Sprintf("repeats %s/%d (%q)", field, j, id))
		}
		seen[id] = i
		inst, err := s.load(ctx, fmt.Sprintf("%s/%d", field, i), id)
		if err != nil {
			return nil, err
		}
		out[i] = inst
	}
	return out, nil
}

// Delegate hands a task to one agent, chosen by strategy, and returns its
// answer.
func (s *Service) Delegate(ctx context.Context, host wop.Caller, req *agentruntime.DelegateRequest) (*agentruntime.DelegateResult, error) {
	if len(bytes.TrimSpace(req.Task)) == 0 || !json.Valid(req.Task) {
		return nil, invalid("task", "a JSON value is required")
	}
	switch req.Strategy {
	case "", agentruntime.StrategyBestMatch, agentruntime.StrategyLoadBalanced:
	default:
		return nil, invalid("strategy", fmt.Sprintf("%q is not best-match or load-balanced", req.Strategy))
	}
	if t := req.EscalationThreshold; t != nil && !(*t >= 0 && *t <= 1) {
		return nil, invalid("escalationThreshold", "must be in [0, 1]")
	}
	if req.TimeoutMs < 0 {
		return nil, invalid("timeoutMs", "must not be negative")
	}
	insts, err := s.loadAll(ctx, "agents", req.Agents)
	if err != nil {
		return nil, err
	}
	text := route.TaskText(req.Task)
	cands := make([]route.Candidate, len(insts))
	for i, in := range insts {
		cands[i] = route.Candidate{ID: in.rec.ID, Name: in.manifest.Name, Description: in.manifest.Description, Skills: in.manifest.Skills}
	}
	var pick int
	if req.Strategy == agentruntime.StrategyLoadBalanced {
		load, err := s.store.InFlight(ctx, req.Agents)
		if err != nil {
			return nil, storeError(err)
		}
		for i := range cands {
			cands[i].InFlight = load[cands[i].ID]
		}
		pick = route.LeastLoaded(cands)
	} else {
		pick = route.BestMatch(text, cands)
	}
	chosen := insts[pick]
	res := &agentruntime.DelegateResult{DelegationID: store.NewID("dlg_"), SelectedAgentID: chosen.rec.ID}
	if route.Escalates(route.Score(text, cands[pick]), req.EscalationThreshold) {
		if err := s.store.StartTask(ctx, res.DelegationID, store.KindDelegation, chosen.rec.ID, store.TaskEscalated, req.Task); err != nil {
			return nil, storeError(err)
		}
		res.Status, res.Escalated = agentruntime.StatusEscalated, true
		return res, nil
	}
	limits := chosen.limits
	if req.TimeoutMs > 0 {
		limits.Timeout = min(limits.Timeout, time.Duration(req.TimeoutMs)*time.Millisecond)
	}
	out, err := s.runTask(ctx, host, chosen, limits, res.DelegationID, store.KindDelegation, req.Task, loop.Task{
		ID: res.DelegationID, Input: taskInput(req.Task),
	})
	if err != nil {
		return nil, err
	}
	res.Status = agentruntime.StatusCompleted
	res.Output = out.output
	return res, nil
}

// taskInput is the user message of a delegated task: a JSON string as its
// text, any other value as compact JSON.
func taskInput(task json.RawMessage) string {
	var s string
	if err := json.Unmarshal(task, &s); err == nil {
		return s
	}
	var b bytes.Buffer
	if err := json.Compact(&b, task); err != nil {
		return string(task)
	}
	return b.String()
}

// runOutcome is a finished run with its output as JSON.
type runOutcome struct {
	result *loop.Result
	output json.RawMessage
}

// runTask records a task, feeds the instance's mailbox into it, runs it,
// and records the outcome.
func (s *Service) runTask(ctx context.Context, host wop.Caller, in *instance, limits loop.Limits, taskID, kind string, input json.RawMessage, task loop.Task) (*runOutcome, error) {
	if err := s.store.StartTask(ctx, taskID, kind, in.rec.ID, store.TaskWorking, input); err != nil {
		return nil, storeError(err)
	}
	// The lease outlives the run, so that a live run never loses its
	// messages to another; a dead process's claims end with its lease, or
	// (embedded store) when the store is opened again.
	msgs, err := s.store.Claim(ctx, in.rec.ID, 0, limits.Timeout+time.Minute)
	if err != nil {
		_ = s.store.FinishTask(context.WithoutCancel(ctx), taskID, store.TaskFailed, nil, errJSON(err))
		return nil, storeError(err)
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
		task.Context = append(task.Context, aienvelope.Message{Role: "user", Content: fmt.Sprintf(
			"Mailbox message %s from %s on channel %q:\n%s", m.ID, m.From, m.Channel, m.Content)})
	}
	runner := &loop.Runner{Host: host, EnvelopeType: s.envelopeType, Handoff: s.resolver(ctx)}
	res, runErr := runner.Run(withAgent(ctx, in), loop.Agent{InstanceID: in.rec.ID, Manifest: in.manifest, Limits: limits}, task)
	// Bookkeeping must happen even when the call's context has ended.
	bg := context.WithoutCancel(ctx)
	if runErr != nil {
		_ = s.store.Release(bg, ids)
		_ = s.store.FinishTask(bg, taskID, store.TaskFailed, nil, errJSON(runErr))
		return nil, runErr
	}
	out := res.Payload
	if len(out) == 0 {
		out, _ = json.Marshal(res.Text)
	}
	if err := s.store.Ack(bg, ids); err != nil {
		return nil, storeError(err)
	}
	if err := s.store.FinishTask(bg, taskID, store.TaskCompleted, out, nil); err != nil {
		return nil, storeError(err)
	}
	return &runOutcome{result: res, output: out}, nil
}

// resolver finds a handoff target: the most recently spawned instance of
// the manifest id.
func (s *Service) resolver(ctx context.Context) loop.Resolver {
	return func(_ context.Context, manifestID string) (loop.Agent, error) {
		id, err := s.store.LatestInstanceOf(ctx, manifestID)
		if errors.Is(err, store.ErrNotFound) {
			return loop.Agent{}, wop.Errorf(agentruntime.CodeAgentNotFound, "handoff target %q has no spawned instance", manifestID)
		}
		if err != nil {
			return loop.Agent{}, storeError(err)
		}
		in, err := s.load(ctx, "handoff", id)
		if err != nil {
			return loop.Agent{}, err
		}
		return loop.Agent{InstanceID: in.rec.ID, Manifest: in.manifest, Limits: in.limits}, nil
	}
}

// withAgent marks the calls of a run with the agent's identity, so that
// the host can enforce the manifest's allowlist on them.
func withAgent(ctx context.Context, in *instance) context.Context {
	cc, _ := wop.CallContextFrom(ctx)
	cc.Caller = "agent:" + in.rec.ID + "@" + in.rec.ManifestDigest
	// The pack's key names the agentRuntime call, not the agent's own
	// calls, each of which carries its own key in its body.
	cc.IdempotencyKey = ""
	return wop.WithCallContext(ctx, cc)
}

// voteSchema is the output asked of a consensus participant.
var voteSchema = json.RawMessage(`{"type":"object","required":["vote"],"properties":{"vote":{},"rationale":{"type":"string"}}}`)

// Consensus has the participants vote on a proposal.
func (s *Service) Consensus(ctx context.Context, host wop.Caller, req *agentruntime.ConsensusRequest) (*agentruntime.ConsensusResult, error) {
	if len(bytes.TrimSpace(req.Proposal)) == 0 || !json.Valid(req.Proposal) {
		return nil, invalid("proposal", "a JSON value is required")
	}
	if req.MaxRounds < 0 || (s.settings.MaxRounds > 0 && req.MaxRounds > s.settings.MaxRounds) {
		return nil, invalid("maxRounds", fmt.Sprintf("must be between 1 and %d", s.settings.MaxRounds))
	}
	creq := consensus.Request{AgentIDs: req.Participants, Strategy: req.Strategy, Threshold: req.Threshold, MaxRounds: req.MaxRounds}
	if _, err := consensus.Required(creq); err != nil {
		return nil, err
	}
	insts, err := s.loadAll(ctx, "participants", req.Participants)
	if err != nil {
		return nil, err
	}
	id := store.NewID("cns_")
	proposal := taskInput(req.Proposal)
	voter := func(ctx context.Context, p, round int, previous []agentruntime.Ballot) (json.RawMessage, string, error) {
		taskID := fmt.Sprintf("%s/r%d/p%d", id, round, p)
		out, err := s.runTask(ctx, host, insts[p], insts[p].limits, taskID, store.KindBallot, req.Proposal, loop.Task{
			ID: taskID, Input: ballotPrompt(proposal, p, previous), Output: &aienvelope.Output{Type: "json", Schema: voteSchema},
		})
		if err != nil {
			return nil, "", err
		}
		return parseVote(out.result)
	}
	return consensus.Run(ctx, creq, voter)
}

// ballotPrompt asks a participant for its vote, showing the previous
// round's ballots in a debate round.
func ballotPrompt(proposal string, participant int, previous []agentruntime.Ballot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Proposal:\n%s\n\n", proposal)
	if len(previous) > 0 {
		b.WriteString("Ballots of the previous round, in participant order:\n")
		for _, pb := range previous {
			mark := ""
			if pb.Participant == participant {
				mark = " (yours)"
			}
			if pb.Error != nil {
				fmt.Fprintf(&b, "- participant %d%s: abstained\n", pb.Participant, mark)
				continue
			}
			fmt.Fprintf(&b, "- participant %d%s: vote %s", pb.Participant, mark, pb.Vote)
			if pb.Rationale != "" {
				fmt.Fprintf(&b, ", because %s", pb.Rationale)
			}
			b.WriteString("\n")
		}
		b.WriteString("\nReconsider your vote in the light of these ballots.\n")
	}
	b.WriteString(`Answer with a JSON object {"vote": <your vote>, "rationale": "<why>"}.`)
	return b.String()
}

// parseVote reads the vote from a participant's answer: the payload's
// "vote", else the text parsed as such an object, else the trimmed text
// as a string vote.
func parseVote(res *loop.Result) (json.RawMessage, string, error) {
	var v struct {
		Vote      json.RawMessage `json:"vote"`
		Rationale string          `json:"rationale"`
	}
	for _, src := range [][]byte{res.Payload, []byte(res.Text)} {
		if len(src) > 0 && json.Unmarshal(src, &v) == nil && len(v.Vote) > 0 && !bytes.Equal(v.Vote, []byte("null")) {
			return v.Vote, v.Rationale, nil
		}
	}
	text := strings.TrimSpace(res.Text)
	if text == "" {
		return nil, "", wop.Errorf(wop.CodeValidation, "the participant gave no vote")
	}
	b, _ := json.Marshal(text)
	return b, "", nil
}

// Bounds on messageSend fields.
const (
	maxAgentRefLen = 256
	maxChannelLen  = 128
	maxKeyLen      = 256
)

// MessageSend queues a message into an instance's mailbox.
func (s *Service) MessageSend(ctx context.Context, req *agentruntime.MessageSendRequest) (*agentruntime.MessageSendResult, error) {
	switch {
	case req.FromAgentID == "" || len(req.FromAgentID) > maxAgentRefLen || !utf8.ValidString(req.FromAgentID):
		return nil, invalid("fromAgentId", fmt.Sprintf("is required, at most %d bytes", maxAgentRefLen))
	case req.ToAgentID == "":
		return nil, invalid("toAgentId", "is required")
	case req.Channel == "" || len(req.Channel) > maxChannelLen || !utf8.ValidString(req.Channel):
		return nil, invalid("channel", fmt.Sprintf("is required, at most %d bytes", maxChannelLen))
	case req.IdempotencyKey == "" || len(req.IdempotencyKey) > maxKeyLen:
		return nil, invalid("idempotencyKey", fmt.Sprintf("is required, at most %d bytes", maxKeyLen))
	case len(bytes.TrimSpace(req.Content)) == 0 || !json.Valid(req.Content):
		return nil, invalid("content", "a JSON value is required")
	}
	var content bytes.Buffer
	if err := json.Compact(&content, req.Content); err != nil {
		return nil, invalid("content", err.Error())
	}
	if s.settings.MaxMessageBytes > 0 && content.Len() > s.settings.MaxMessageBytes {
		return nil, invalid("content", fmt.Sprintf("is %d bytes, over the %d-byte limit", content.Len(), s.settings.MaxMessageBytes))
	}
	msg, _, err := s.store.Enqueue(ctx, store.NewMessage{
		To: req.ToAgentID, From: req.FromAgentID, Channel: req.Channel, Content: content.Bytes(),
		IdempotencyKey: req.IdempotencyKey, RequestDigest: sum(req.FromAgentID, req.Channel, content.String()),
	}, s.settings.MailboxCapacity)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, wop.Errorf(agentruntime.CodeAgentNotFound, "toAgentId: no agent instance %q", req.ToAgentID)
	case errors.Is(err, store.ErrMailboxFull):
		return nil, wop.Errorf(agentruntime.CodeMailboxFull, "%v", err).WithRetryable(true)
	case errors.Is(err, store.ErrIdempotencyMismatch):
		return nil, wop.Errorf(wop.CodeIdempotencyKeyMismatch, "%v", err)
	case err != nil:
		return nil, storeError(err)
	}
	return &agentruntime.MessageSendResult{MessageID: msg.ID, SentAt: msg.SentAt}, nil
}

// Instances answers a page of the instances in spawn order, for the
// operator: each with its mailbox and its working tasks, and the quota
// and capacity they are held to. It only reads.
func (s *Service) Instances(ctx context.Context, req *agentruntime.InstancesRequest) (*agentruntime.InstancesResult, error) {
	limit, err := req.PageSize()
	if err != nil {
		return nil, err
	}
	page, err := s.store.ListInstances(ctx, req.After, limit)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, invalid("after", fmt.Sprintf("no agent instance %q: pass the next of the previous page", req.After))
	case err != nil:
		return nil, storeError(err)
	}
	res := &agentruntime.InstancesResult{
		Instances:  make([]agentruntime.InstanceSummary, len(page.Instances)),
		Next:       page.Next,
		SpawnQuota: s.settings.SpawnQuota, SpawnedCount: page.Total, MailboxCapacity: s.settings.MailboxCapacity,
	}
	for i, st := range page.Instances {
		res.Instances[i] = agentruntime.InstanceSummary{
			AgentInstanceID: st.ID, ManifestID: st.ManifestID, ManifestDigest: st.ManifestDigest, SpawnedAt: st.SpawnedAt,
			State: agentruntime.StateOf(st.Working), Mailbox: st.Queued, Tasks: st.Working,
		}
	}
	return res, nil
}

func invalid(field, msg string) *wop.Error {
	return wop.Errorf(wop.CodeValidation, "%s: %s", field, msg).WithDetails(map[string]string{"pointer": "/" + field})
}

func manifestInvalid(err error) *wop.Error {
	var me *agentruntime.ManifestError
	if errors.As(err, &me) {
		ptrs := make([]map[string]string, len(me.Problems))
		for i, p := range me.Problems {
			ptrs[i] = map[string]string{"pointer": "/manifest" + p.Pointer, "message": p.Message}
		}
		return wop.Errorf(wop.CodeValidation, "manifest: %v", err).WithDetails(map[string]any{"problems": ptrs})
	}
	return wop.Errorf(wop.CodeValidation, "manifest: %v", err)
}

// storeError reports a store failure as unavailable: the database is the
// runtime's, so a failure there is the runtime's, and worth a retry. A
// shared database out of reach is said so.
func storeError(err error) *wop.Error {
	if pgstore.Unavailable(err) {
		return wop.Errorf(wop.CodeUnavailable, "agent store: the database cannot be reached: %v", err).WithRetryable(true)
	}
	return wop.Errorf(wop.CodeUnavailable, "agent store: %v", err).WithRetryable(true)
}

func errJSON(err error) []byte {
	b, _ := json.Marshal(wop.AsError(err))
	return b
}

// sum digests request fields for idempotency checks.
func sum(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}
