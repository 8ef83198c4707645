package host

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/idempotency"
	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/sdk/plugin"
)

// Bounds of the host's own calls to the database of the postgres backend
// besides its stores' statements, which statement_timeout bounds.
const (
	// databaseOpenTimeout bounds opening the pool, migrations included.
	databaseOpenTimeout = 10 * time.Second
	// databasePingTimeout bounds the health check's ping.
	databasePingTimeout = 2 * time.Second
)

// errDatabaseClosed is the answer of a state whose host has stopped.
var errDatabaseClosed = errors.New("the host's database pool is closed")

// postgres reports whether the host keeps its state in PostgreSQL.
func (s *state) postgres() bool { return s.storage.Backend == config.BackendPostgres }

// database returns the pool of the host's schema, opening it (and
// applying the schema's migrations) on first use. A failure is returned
// as a *StorageError that names no dsn, and opening is tried again at the
// next use, so the host recovers once the database is reachable; the pool
// then reconnects by itself.
func (s *state) database(ctx context.Context) (*pgxpool.Pool, error) {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if s.dbClosed {
		return nil, errDatabaseClosed
	}
	if s.pool != nil {
		return s.pool, nil
	}
	ctx, cancel := context.WithTimeout(ctx, databaseOpenTimeout)
	defer cancel()
	settings := plugin.Storage{
		Backend: s.storage.Backend, DSN: s.storage.DSN, MaxConnections: s.storage.MaxConnections,
		StatementTimeout: s.storage.StatementTimeout, Schema: config.HostStorageSchema,
	}
	pool, err := pgstore.Open(ctx, settings, config.HostStorageSchema, hostMigrations())
	if err != nil {
		s.logger.Warn("the host's database cannot be opened; it is tried again at the next use", "schema", config.HostStorageSchema, "error", err)
		return nil, &StorageError{Backend: config.BackendPostgres, Reason: "it cannot be reached", cause: err}
	}
	s.pool = pool
	return pool, nil
}

// closeDatabase closes the pool, if one was opened; later uses fail.
func (s *state) closeDatabase() {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	s.dbClosed = true
	if s.pool != nil {
		s.pool.Close()
		s.pool = nil
	}
}

// ping is the health check of the postgres backend: the pool opens and
// answers.
func (s *state) ping(ctx context.Context) error {
	pool, err := s.database(ctx)
	if err != nil {
		return err
	}
	return pool.Ping(ctx)
}

// runRecords returns the store of run records of the host's backend.
func (s *state) runRecords(ctx context.Context) (runRecordStore, error) {
	if !s.postgres() {
		return &fileRunRecords{dir: filepath.Join(s.dir, RunsDir), synced: s.synced, cache: s.summaries}, nil
	}
	pool, err := s.database(ctx)
	if err != nil {
		return nil, err
	}
	return &pgRunRecords{pool: pool, now: s.now}, nil
}

// writeRunRecord stores rec in the host's backend and returns where: the
// file's path, or with postgres the run id.
func (s *state) writeRunRecord(rec *RunRecord) (string, error) {
	data, err := encodeRunRecord(rec)
	if err != nil {
		return "", err
	}
	// Not the run's context: the record is written even for a run that
	// ran out of time.
	ctx := context.Background()
	store, err := s.runRecords(ctx)
	if err != nil {
		return "", err
	}
	return store.put(ctx, rec.RunID, data)
}

// openIdempotencyStore opens the idempotency store of the host's backend.
func (s *state) openIdempotencyStore() (idempotency.Store, error) {
	if !s.postgres() {
		return idempotency.OpenFileStore(filepath.Join(s.dir, IdempotencyDir), s.maxRecordBytes)
	}
	pool, err := s.database(context.Background())
	if err != nil {
		return nil, err
	}
	return idempotency.NewPostgresStore(pool), nil
}
