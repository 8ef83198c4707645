package store

import (
	"context"
	"testing"

	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/sdk/plugin"
)

// openPostgres returns n stores on one fresh database's schema, each with
// a pool of its own, as n hosts would hold. It skips without a server.
func openPostgres(t *testing.T, n int) []Backend {
	t.Helper()
	settings := plugin.Storage{Backend: plugin.StoragePostgres, DSN: pgtest.DSN(t), MaxConnections: 8}
	const schema = "wophost_prompts"
	var out []Backend
	for range n {
		pool, err := pgstore.Open(context.Background(), settings, schema, Migrations())
		if err != nil {
			t.Fatal(err)
		}
		b := NewPostgres(pool, schema)
		t.Cleanup(b.Close)
		out = append(out, b)
	}
	return out
}
