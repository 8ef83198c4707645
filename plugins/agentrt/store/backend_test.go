package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/sdk/plugin"
)

// backendCase is one store implementation the contract tests run on.
type backendCase struct {
	name string
	// open returns a fresh store on clock c, and a func opening another
	// handle on the same state, as another process (or host) would; the
	// test closes every handle at its end.
	open func(t *testing.T, c *clock) (Backend, func() Backend)
}

func backendCases() []backendCase {
	return []backendCase{
		{name: "embedded", open: func(t *testing.T, c *clock) (Backend, func() Backend) {
			path := filepath.Join(t.TempDir(), "agents.db")
			another := func() Backend { return open(t, path, c) }
			return another(), another
		}},
		{name: "postgres", open: func(t *testing.T, c *clock) (Backend, func() Backend) {
			dsn := pgtest.DSN(t)
			another := func() Backend { return openPostgres(t, dsn, c) }
			return another(), another
		}},
	}
}

// eachBackend runs fn once per backend.
func eachBackend(t *testing.T, fn func(t *testing.T, bc backendCase)) {
	for _, bc := range backendCases() {
		t.Run(bc.name, func(t *testing.T) { fn(t, bc) })
	}
}

// pgSchema is the schema the tests' PostgreSQL stores share.
const pgSchema = "wophost_agents"

// openPostgres opens a store with a pool of its own on the database of
// dsn, as one host would.
func openPostgres(t *testing.T, dsn string, c *clock) *Postgres {
	t.Helper()
	settings := plugin.Storage{Backend: plugin.StoragePostgres, DSN: dsn, MaxConnections: 8}
	pool, err := pgstore.Open(context.Background(), settings, pgSchema, Migrations())
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenPostgres(context.Background(), pool, Options{Now: c.now})
	if err != nil {
		pool.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
