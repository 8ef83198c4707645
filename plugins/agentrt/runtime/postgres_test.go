package runtime

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/plugins/agentrt/store"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// With the shared database out of reach, calls answer unavailable,
// retryable, and work again once it is back.
func TestDatabaseDownIsUnavailable(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.StartPrivate(t)
	settings := plugin.Storage{Backend: plugin.StoragePostgres, DSN: srv.DSN(), MaxConnections: 4}
	pool, err := pgstore.Open(ctx, settings, "wophost_agents", store.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenPostgres(ctx, pool, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc := New(st, DefaultSettings())
	to := spawn(t, svc, "k1", manifest("writer", "Writes prose."))

	srv.Stop()
	_, spawnErr := svc.Spawn(ctx, &agentruntime.SpawnRequest{Manifest: manifest("reader", "Reads."), IdempotencyKey: "k2"})
	_, sendErr := svc.MessageSend(ctx, &agentruntime.MessageSendRequest{
		FromAgentID: "x", ToAgentID: to, Channel: "c", Content: json.RawMessage(`1`), IdempotencyKey: "m1"})
	for name, err := range map[string]error{"spawn": spawnErr, "messageSend": sendErr} {
		if code(err) != wop.CodeUnavailable || !wop.IsRetryable(err) {
			t.Errorf("%s with the database down: %v; want unavailable, retryable", name, err)
		}
	}
	srv.Start()
	spawn(t, svc, "k2", manifest("reader", "Reads."))
}
