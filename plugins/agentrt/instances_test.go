package main

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/plugintest"
	"github.com/wophost/wophost/sdk/wop"
)

// The built plugin lists instances through the protocol on either storage
// backend: the method is described, and the answer pages through what
// spawn and messageSend left in the store.
func TestInstancesThroughProtocol(t *testing.T) {
	bin := binary(t)
	for _, backend := range []string{plugin.StorageEmbedded, plugin.StoragePostgres} {
		t.Run(backend, func(t *testing.T) {
			storage := plugin.Storage{Backend: backend}
			if backend == plugin.StoragePostgres {
				storage.DSN, storage.MaxConnections = pgtest.DSN(t), 4
			}
			testInstancesThroughProtocol(t, plugintest.Start(t, plugintest.Config{Binary: bin, Storage: storage}))
		})
	}
}

func testInstancesThroughProtocol(t *testing.T, p *plugintest.Plugin) {
	d := p.Describe(t)
	i := slices.IndexFunc(d.Families, func(f plugintest.FamilyDescription) bool { return f.Name == agentruntime.Family })
	if i < 0 || !slices.Contains(d.Families[i].Methods, agentruntime.MethodInstances) {
		t.Fatalf("described families %+v: want %s with %s", d.Families, agentruntime.Family, agentruntime.MethodInstances)
	}
	p.Configure(t, json.RawMessage(`{"mailbox_capacity":3,"spawn_quota":7}`))
	call := func(method string, req any) (json.RawMessage, error) {
		t.Helper()
		payload, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		return p.Invoke(ctx, agentruntime.Family, method, payload, wop.CallContext{RunID: "run-instances", Caller: admission.Operator, Deadline: time.Now().Add(30 * time.Second)})
	}
	var ids []string
	for _, key := range []string{"one", "two", "three"} {
		var req agentruntime.SpawnRequest
		if err := json.Unmarshal([]byte(spawnPayload), &req); err != nil {
			t.Fatal(err)
		}
		req.IdempotencyKey = key
		out, err := call(agentruntime.MethodSpawn, &req)
		if err != nil {
			t.Fatalf("spawn %s: %v", key, err)
		}
		var res agentruntime.SpawnResult
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.AgentInstanceID)
	}
	if _, err := call(agentruntime.MethodMessageSend, &agentruntime.MessageSendRequest{
		FromAgentID: ids[0], ToAgentID: ids[2], Channel: "c", Content: json.RawMessage(`"hi"`), IdempotencyKey: "m"}); err != nil {
		t.Fatal(err)
	}

	listed := map[string]agentruntime.InstanceSummary{}
	req := agentruntime.InstancesRequest{Limit: 2}
	for pages := 1; ; pages++ {
		out, err := call(agentruntime.MethodInstances, &req)
		if err != nil {
			t.Fatalf("instances after %q: %v", req.After, err)
		}
		var res agentruntime.InstancesResult
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("instances answered %s: %v", out, err)
		}
		if res.SpawnQuota != 7 || res.SpawnedCount != 3 || res.MailboxCapacity != 3 || len(res.Instances) > 2 {
			t.Errorf("page %d = %s", pages, out)
		}
		for _, in := range res.Instances {
			listed[in.AgentInstanceID] = in
		}
		if res.Next == "" {
			if pages != 2 {
				t.Errorf("%d pages of 2 for 3 instances, want 2", pages)
			}
			break
		}
		if pages == 3 {
			t.Fatalf("still paging at page %d", pages)
		}
		req.After = res.Next
	}
	for i, id := range ids {
		in, ok := listed[id]
		wantMailbox := 0
		if i == 2 {
			wantMailbox = 1
		}
		if !ok || in.ManifestID != "helper" || in.State != agentruntime.InstanceIdle || in.Mailbox != wantMailbox || in.Tasks != 0 {
			t.Errorf("instance %s listed as %+v (listed: %t), want helper, idle, mailbox %d", id, in, ok, wantMailbox)
		}
	}
	if len(listed) != len(ids) {
		t.Errorf("listed %d instances, want %d", len(listed), len(ids))
	}

	// A limit over the maximum, an unknown member (the request is decoded
	// strictly) and an after naming no instance are refused.
	for _, bad := range []string{`{"limit":1001}`, `{"limits":2}`, `{"after":"agt_nope"}`} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		_, err := p.Invoke(ctx, agentruntime.Family, agentruntime.MethodInstances, json.RawMessage(bad), wop.CallContext{RunID: "run-instances", Caller: admission.Operator, Deadline: time.Now().Add(30 * time.Second)})
		cancel()
		if wop.CodeOf(err) != wop.CodeValidation {
			t.Errorf("instances %s: %v, want validation_error", bad, err)
		}
	}
}
