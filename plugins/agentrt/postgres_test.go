package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/plugins/agentrt/store"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/plugintest"
	"github.com/wophost/wophost/sdk/wop"
)

// With the postgres storage backend, the plugins of two hosts share one
// spawn quota, one set of spawn keys and every mailbox.
func TestPostgresBackendShared(t *testing.T) {
	ctx := context.Background()
	storage := plugin.Storage{Backend: plugin.StoragePostgres, DSN: pgtest.DSN(t), MaxConnections: 4, Schema: "wophost_agents"}
	hosts := []*agentrt{{}, {}}
	for _, a := range hosts {
		req := &plugin.ConfigureRequest{Config: json.RawMessage(`{"spawn_quota":1}`), StateDir: t.TempDir(), Storage: storage}
		if err := a.configure(ctx, req); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.shutdown)
		if _, ok := a.store.(*store.Postgres); !ok {
			t.Fatalf("store %T, want *store.Postgres", a.store)
		}
	}
	m := json.RawMessage(spawnPayload)
	var req agentruntime.SpawnRequest
	if err := json.Unmarshal(m, &req); err != nil {
		t.Fatal(err)
	}
	first, err := hosts[0].Spawn(ctx, nil, &req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := hosts[1].Spawn(ctx, nil, &req)
	if err != nil || again.AgentInstanceID != first.AgentInstanceID {
		t.Fatalf("the same spawn through the other host = %+v, %v; want %s", again, err, first.AgentInstanceID)
	}
	req.IdempotencyKey = "other"
	if _, err := hosts[1].Spawn(ctx, nil, &req); wop.CodeOf(err) != agentruntime.CodeAgentSpawnQuotaExhausted {
		t.Fatalf("a second instance through the other host: %v, want %s", err, agentruntime.CodeAgentSpawnQuotaExhausted)
	}
	send := &agentruntime.MessageSendRequest{FromAgentID: "x", ToAgentID: first.AgentInstanceID, Channel: "c", Content: json.RawMessage(`1`), IdempotencyKey: "m"}
	sent, err := hosts[1].MessageSend(ctx, nil, send)
	if err != nil {
		t.Fatal(err)
	}
	resent, err := hosts[0].MessageSend(ctx, nil, send)
	if err != nil || resent.MessageID != sent.MessageID {
		t.Fatalf("the same message through the other host = %+v, %v; want %s", resent, err, sent.MessageID)
	}
}

// The plugin passes the protocol conformance kit with the postgres
// storage backend too.
func TestConformancePostgres(t *testing.T) {
	plugintest.Run(t, plugintest.Config{
		Binary:  binary(t),
		Config:  json.RawMessage(`{"mailbox_capacity":4}`),
		Storage: plugin.Storage{Backend: plugin.StoragePostgres, DSN: pgtest.DSN(t), MaxConnections: 4},
		Calls: []plugintest.Call{{Family: "agentRuntime", Method: "spawn", Payload: json.RawMessage(spawnPayload),
			Check: func(t testing.TB, res json.RawMessage) {
				var r struct{ AgentInstanceID string }
				if err := json.Unmarshal(res, &r); err != nil || r.AgentInstanceID == "" {
					t.Errorf("spawn = %s, %v", res, err)
				}
			}}},
	})
}
