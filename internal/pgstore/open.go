package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"

	"github.com/wophost/wophost/sdk/plugin"
)

// Settings are the storage settings a store opens its pool with: those
// the host hands every plugin at Configure. Open uses Backend only to
// refuse one other than postgres, and its schema argument rather than
// Schema, so the host's own stores can name theirs.
type Settings = plugin.Storage

// VersionTable is the table, in each store's schema, holding the number of
// the last migration applied.
const VersionTable = "schema_version"

// isSchemaName reports whether s is what Open accepts as a schema: a
// lowercase identifier of at most 63 bytes that needs no quoting, as
// config.StorageSchema derives. It is a loop rather than a regular
// expression compiled at package init, which every plugin linking this
// package would pay for at start (722 allocations), postgres or not.
func isSchemaName(s string) bool {
	if s == "" || len(s) > 63 || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Open connects to the database of s, creates schema if it does not exist,
// applies the migrations in migrations (files named NNN_name.sql at its
// root, numbered from 1 without gaps) that the schema lacks, and returns
// a pool of at most s.MaxConnections connections, each with search_path
// set to schema and statement_timeout to s.StatementTimeout. Hosts
// opening the same schema at once apply each migration once. Errors never
// quote the DSN. The caller closes the pool.
func Open(ctx context.Context, s Settings, schema string, migrations fs.FS) (*pgxpool.Pool, error) {
	if s.Backend != plugin.StoragePostgres {
		return nil, fmt.Errorf("pgstore: backend is %q, not %q", s.Backend, plugin.StoragePostgres)
	}
	if !isSchemaName(schema) {
		return nil, fmt.Errorf("pgstore: schema %q is not a lowercase identifier of at most 63 bytes", schema)
	}
	cfg, err := pgxpool.ParseConfig(s.DSN)
	if err != nil {
		// pgx's message quotes the connection string, password masked;
		// the rest of it is no business of a log either.
		return nil, errors.New("pgstore: the dsn cannot be parsed")
	}
	if s.MaxConnections > 0 {
		cfg.MaxConns = int32(min(s.MaxConnections, 1<<31-1))
	}
	params := cfg.ConnConfig.RuntimeParams
	params["search_path"] = schema
	params["statement_timeout"] = strconv.FormatInt(s.StatementTimeout.Milliseconds(), 10)

	if err := migrateSchema(ctx, cfg.ConnConfig.Copy(), schema, migrations); err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open the pool of %s: %w", schema, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: connect for %s: %w", schema, err)
	}
	return pool, nil
}

// migrateSchema creates schema and applies migrations on a connection of
// its own. That connection has no statement_timeout: a migration may take
// long, and so may waiting for another host's. The advisory lock, keyed by
// the schema, also covers CREATE SCHEMA, which two sessions running it at
// once can fail with a unique violation.
func migrateSchema(ctx context.Context, cc *pgx.ConnConfig, schema string, migrations fs.FS) error {
	cc.RuntimeParams["statement_timeout"] = "0"
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("pgstore: connect to migrate %s: %w", schema, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	lockKey := "wophost.pgstore." + schema
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", lockKey); err != nil {
		return fmt.Errorf("pgstore: lock %s for migration: %w", schema, err)
	}
	// Closing the connection releases the lock too, should unlocking fail.
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtext($1))", lockKey)

	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
		return fmt.Errorf("pgstore: create schema %s: %w", schema, err)
	}
	m, err := migrate.NewMigrator(ctx, conn, schema+"."+VersionTable)
	if err != nil {
		return fmt.Errorf("pgstore: prepare the migrations of %s: %w", schema, err)
	}
	if err := m.LoadMigrations(migrations); err != nil {
		return fmt.Errorf("pgstore: load the migrations of %s: %w", schema, err)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("pgstore: migrate %s: %w", schema, err)
	}
	return nil
}
