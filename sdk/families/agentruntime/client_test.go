package agentruntime

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

type recordedCall struct {
	family, method, body string
}

// fakeCaller behaves like a real wop.Caller: it marshals req and
// unmarshals a canned JSON answer into res.
type fakeCaller struct {
	calls  []recordedCall
	answer string
	err    error
}

func (f *fakeCaller) Call(_ context.Context, family, method string, req, res any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	f.calls = append(f.calls, recordedCall{family, method, string(b)})
	if f.err != nil {
		return f.err
	}
	if res != nil && f.answer != "" {
		return json.Unmarshal([]byte(f.answer), res)
	}
	return nil
}

// invoke calls method on c with req and returns the result as any, so that
// tests can treat the four methods alike.
func invoke(c *Client, method string, req any) (any, error) {
	ctx := context.Background()
	switch method {
	case MethodSpawn:
		r, _ := req.(*SpawnRequest)
		return c.Spawn(ctx, r)
	case MethodDelegate:
		r, _ := req.(*DelegateRequest)
		return c.Delegate(ctx, r)
	case MethodConsensus:
		r, _ := req.(*ConsensusRequest)
		return c.Consensus(ctx, r)
	case MethodMessageSend:
		r, _ := req.(*MessageSendRequest)
		return c.MessageSend(ctx, r)
	case MethodInstances:
		r, _ := req.(*InstancesRequest)
		return c.Instances(ctx, r)
	}
	panic("unknown method " + method)
}

var methods = []struct {
	method, capability string
	req                any
}{
	{MethodSpawn, "host.agentRuntime.spawn", &SpawnRequest{ManifestID: "researcher", IdempotencyKey: "k"}},
	{MethodDelegate, "host.agentRuntime.delegate", &DelegateRequest{Task: json.RawMessage(`"t"`), Agents: []string{"a"}}},
	{MethodConsensus, "host.agentRuntime.consensus", &ConsensusRequest{Proposal: json.RawMessage(`"p"`), Participants: []string{"a"}}},
	{MethodMessageSend, "host.agentRuntime.messageSend", &MessageSendRequest{FromAgentID: "a", ToAgentID: "b", Channel: "c", Content: json.RawMessage(`"x"`), IdempotencyKey: "k"}},
	{MethodInstances, "host.agentRuntime.instances", &InstancesRequest{Limit: 10}},
}

func TestNilClient(t *testing.T) {
	var c *Client
	for _, m := range methods {
		_, err := invoke(c, m.method, m.req)
		var we *wop.Error
		if !errors.As(err, &we) {
			t.Fatalf("%s: error = %v, want *wop.Error", m.method, err)
		}
		if we.Code != wop.CodeCapabilityNotProvided || we.Capability != m.capability {
			t.Errorf("%s: error = %q/%q, want %q/%q", m.method, we.Code, we.Capability, wop.CodeCapabilityNotProvided, m.capability)
		}
	}
	if NewClient(nil, nil) != nil {
		t.Error("NewClient(nil) is not nil")
	}
}

func TestRequestJSON(t *testing.T) {
	tests := []struct {
		name, method string
		req          any
		want         string
	}{
		{"spawn by id", MethodSpawn, &SpawnRequest{ManifestID: "researcher", IdempotencyKey: "k1"},
			`{"manifestId":"researcher","idempotencyKey":"k1"}`},
		{"spawn inline", MethodSpawn, &SpawnRequest{
			Manifest:       json.RawMessage(`{"id":"r","name":"R","systemPromptRef":"p@1","toolAllowlist":["docs/search"]}`),
			Config:         json.RawMessage(`{"maxTurns":3}`),
			IdempotencyKey: "k2"},
			`{"manifest":{"id":"r","name":"R","systemPromptRef":"p@1","toolAllowlist":["docs/search"]},"config":{"maxTurns":3},"idempotencyKey":"k2"}`},
		{"delegate minimal", MethodDelegate, &DelegateRequest{Task: json.RawMessage(`{"q":"x"}`), Agents: []string{"agt_a"}},
			`{"task":{"q":"x"},"agents":["agt_a"]}`},
		{"delegate full", MethodDelegate, &DelegateRequest{Task: json.RawMessage(`"write"`), Agents: []string{"agt_a", "agt_b"},
			Strategy: StrategyLoadBalanced, TimeoutMs: 30000, EscalationThreshold: new(0.0)},
			`{"task":"write","agents":["agt_a","agt_b"],"strategy":"load-balanced","timeoutMs":30000,"escalationThreshold":0}`},
		{"consensus minimal", MethodConsensus, &ConsensusRequest{Proposal: json.RawMessage(`"ship it"`), Participants: []string{"agt_a", "agt_b"}},
			`{"proposal":"ship it","participants":["agt_a","agt_b"]}`},
		{"consensus full", MethodConsensus, &ConsensusRequest{Proposal: json.RawMessage(`{"plan":1}`), Participants: []string{"agt_a"},
			Strategy: StrategyQuorum, Threshold: new(0.66), MaxRounds: 3},
			`{"proposal":{"plan":1},"participants":["agt_a"],"strategy":"quorum","threshold":0.66,"maxRounds":3}`},
		{"messageSend", MethodMessageSend, &MessageSendRequest{FromAgentID: "agt_a", ToAgentID: "agt_b", Channel: "review",
			Content: json.RawMessage(`{"text":"please review"}`), IdempotencyKey: "k3"},
			`{"fromAgentId":"agt_a","toAgentId":"agt_b","channel":"review","content":{"text":"please review"},"idempotencyKey":"k3"}`},
		{"instances first page", MethodInstances, &InstancesRequest{}, `{}`},
		{"instances next page", MethodInstances, &InstancesRequest{Limit: 2, After: "agt_b"}, `{"limit":2,"after":"agt_b"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCaller{answer: `{}`}
			if _, err := invoke(NewClient(f, nil), tt.method, tt.req); err != nil {
				t.Fatal(err)
			}
			if len(f.calls) != 1 {
				t.Fatalf("calls = %d, want 1", len(f.calls))
			}
			if got, want := f.calls[0], (recordedCall{"agentRuntime", tt.method, tt.want}); got != want {
				t.Errorf("call\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestResults(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

	f := &fakeCaller{answer: `{"agentInstanceId":"agt_1","spawnedAt":"2026-11-29T10:00:00Z","manifestDigest":"sha256:ab"}`}
	sp, err := NewClient(f, nil).Spawn(ctx, &SpawnRequest{ManifestID: "r", IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if sp.AgentInstanceID != "agt_1" || !sp.SpawnedAt.Equal(at) || sp.ManifestDigest != "sha256:ab" {
		t.Errorf("spawn = %+v", sp)
	}

	f = &fakeCaller{answer: `{"delegationId":"dlg_1","selectedAgentId":"agt_b","status":"completed","output":{"summary":"ok"},"escalated":true}`}
	dl, err := NewClient(f, nil).Delegate(ctx, &DelegateRequest{Task: json.RawMessage(`1`), Agents: []string{"agt_b"}})
	if err != nil {
		t.Fatal(err)
	}
	if dl.DelegationID != "dlg_1" || dl.SelectedAgentID != "agt_b" || dl.Status != "completed" ||
		string(dl.Output) != `{"summary":"ok"}` || !dl.Escalated {
		t.Errorf("delegate = %+v", dl)
	}

	f = &fakeCaller{answer: `{"converged":true,"rounds":2,"agreement":0.5,"decision":"yes",
		"ballots":[{"participant":0,"agentId":"agt_a","vote":"yes","rationale":"tests pass"},{"participant":1,"agentId":"agt_b","vote":"no"}]}`}
	cs, err := NewClient(f, nil).Consensus(ctx, &ConsensusRequest{Proposal: json.RawMessage(`1`), Participants: []string{"agt_a", "agt_b"}})
	if err != nil {
		t.Fatal(err)
	}
	if !cs.Converged || cs.Rounds != 2 || cs.Agreement != 0.5 || string(cs.Decision) != `"yes"` || len(cs.Ballots) != 2 {
		t.Fatalf("consensus = %+v", cs)
	}
	if b := cs.Ballots[0]; b.Participant != 0 || b.AgentID != "agt_a" || string(b.Vote) != `"yes"` || b.Rationale != "tests pass" {
		t.Errorf("ballot 0 = %+v", b)
	}
	if b := cs.Ballots[1]; b.Participant != 1 || b.AgentID != "agt_b" || string(b.Vote) != `"no"` || b.Rationale != "" {
		t.Errorf("ballot 1 = %+v", b)
	}

	f = &fakeCaller{answer: `{"messageId":"msg_1","sentAt":"2026-11-29T10:00:00Z"}`}
	ms, err := NewClient(f, nil).MessageSend(ctx, &MessageSendRequest{FromAgentID: "a", ToAgentID: "b", Channel: "c", Content: json.RawMessage(`1`), IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if ms.MessageID != "msg_1" || !ms.SentAt.Equal(at) {
		t.Errorf("messageSend = %+v", ms)
	}
}

func TestConsensusResultMarshal(t *testing.T) {
	b, err := json.Marshal(&ConsensusResult{Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"converged":false,"rounds":1,"agreement":0,"ballots":[]}`; string(b) != want {
		t.Errorf("got %s\nwant %s", b, want)
	}
}

func TestCallerErrorUnchanged(t *testing.T) {
	want := &wop.Error{Code: CodeAgentBudgetExceeded, Message: "budget", Details: json.RawMessage(`{"cause":{"code":"provider_quota_exhausted"}}`)}
	for _, m := range methods {
		f := &fakeCaller{err: want}
		if _, err := invoke(NewClient(f, nil), m.method, m.req); err != want {
			t.Errorf("%s: error = %#v, want %#v", m.method, err, want)
		}
	}
}

func TestNilRequest(t *testing.T) {
	for _, m := range methods {
		f := &fakeCaller{}
		if _, err := invoke(NewClient(f, nil), m.method, nil); wop.CodeOf(err) != wop.CodeValidation {
			t.Errorf("%s(nil) = %v, want validation_error", m.method, err)
		}
		if len(f.calls) != 0 {
			t.Errorf("%s(nil): host called %d times, want 0", m.method, len(f.calls))
		}
	}
}
