// Package store keeps the agent runtime's durable state in an embedded
// SQLite database: agent instances, tasks (delegations and consensus
// ballots) and the mailbox of every instance.
//
// The database runs in WAL mode with synchronous=FULL, so that a
// transaction that has returned is on disk and survives a kill of the
// process. All writes are serialised through one connection; the runtime's
// write rate is a few rows per model call, far below what that serves.
package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base32"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Errors callers branch on. Each is wrapped with context; use errors.Is.
var (
	ErrNotFound            = errors.New("not found")
	ErrMailboxFull         = errors.New("mailbox full")
	ErrSpawnQuota          = errors.New("spawn quota exhausted")
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request")
)

// Options tune a Store.
type Options struct {
	// Now returns the current time; nil means time.Now. Tests pass a fixed
	// clock so that stored times are predictable.
	Now func() time.Time
	// BusyTimeout is how long a statement waits for a lock held by
	// another connection. Zero means 5s.
	BusyTimeout time.Duration
}

// Store is the runtime's database. It is safe for concurrent use.
type Store struct {
	db  *sql.DB
	now func() time.Time
}

// migrations are applied in order; the index plus one is the schema
// version. Never edit an applied migration: append a new one.
var migrations = []string{
	// 1: instances, tasks and mailboxes.
	`CREATE TABLE instances (
		id              TEXT PRIMARY KEY,
		manifest_id     TEXT NOT NULL,
		manifest_digest TEXT NOT NULL,
		manifest        BLOB NOT NULL,
		config          BLOB,
		idempotency_key TEXT NOT NULL UNIQUE,
		request_digest  TEXT NOT NULL,
		spawned_at      INTEGER NOT NULL
	);
	CREATE TABLE tasks (
		id          TEXT PRIMARY KEY,
		kind        TEXT NOT NULL,
		instance_id TEXT NOT NULL REFERENCES instances(id),
		status      TEXT NOT NULL,
		input       BLOB,
		output      BLOB,
		error       BLOB,
		created_at  INTEGER NOT NULL,
		updated_at  INTEGER NOT NULL
	);
	CREATE INDEX tasks_instance_status ON tasks(instance_id, status);
	CREATE TABLE messages (
		seq             INTEGER PRIMARY KEY AUTOINCREMENT,
		id              TEXT NOT NULL UNIQUE,
		to_instance     TEXT NOT NULL REFERENCES instances(id),
		from_agent      TEXT NOT NULL,
		channel         TEXT NOT NULL,
		content         BLOB NOT NULL,
		idempotency_key TEXT NOT NULL,
		request_digest  TEXT NOT NULL,
		sent_at         INTEGER NOT NULL,
		state           TEXT NOT NULL,
		claimed_until   INTEGER,
		attempts        INTEGER NOT NULL DEFAULT 0,
		delivered_at    INTEGER,
		UNIQUE (to_instance, idempotency_key)
	);
	CREATE INDEX messages_mailbox ON messages(to_instance, state, seq);`,
}

// Open opens (creating if needed) the database at path and brings its
// schema up to date. Work that a previous process left in flight is
// released: its tasks are marked interrupted and its claimed messages go
// back to their mailboxes, so they are delivered again.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 5 * time.Second
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open agent store %s: %w", path, err)
	}
	// One connection: writes are serialised anyway, and a single
	// connection rules out SQLITE_BUSY between our own statements.
	db.SetMaxOpenConns(1)
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	s := &Store{db: db, now: now}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("agent store %s: %w", path, err)
	}
	if err := s.recover(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("agent store %s: %w", path, err)
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// SchemaVersion returns the number of migrations applied.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	current, err := s.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if current > len(migrations) {
		return fmt.Errorf("database schema version %d is newer than this runtime knows (%d)", current, len(migrations))
	}
	for v := current + 1; v <= len(migrations); v++ {
		err := s.tx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, migrations[v-1]); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(version, applied_at) VALUES (?, ?)`, v, s.now().UnixMilli())
			return err
		})
		if err != nil {
			return fmt.Errorf("apply migration %d: %w", v, err)
		}
	}
	return nil
}

func (s *Store) recover(ctx context.Context) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		now := s.now().UnixMilli()
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET status = ?, updated_at = ? WHERE status = ?`,
			TaskInterrupted, now, TaskWorking); err != nil {
			return fmt.Errorf("release interrupted tasks: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET claimed_until = NULL WHERE state = ?`, stateQueued); err != nil {
			return fmt.Errorf("release claimed messages: %w", err)
		}
		return nil
	})
}

// tx runs fn in a write transaction (BEGIN IMMEDIATE, from the DSN), so
// that read-then-write sequences such as "count the mailbox, then insert"
// are atomic.
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// NewID returns a random id with the given prefix, e.g. "agt_". Ids are
// 20 characters of lowercase base32 (100 bits) after the prefix.
func NewID(prefix string) string {
	var b [13]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))[:20]
}

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
