// Package store keeps the aiEnvelope plugin's envelopes in an embedded
// SQLite database: one row per idempotency key, holding the request's
// digest, its state (pending, completed, failed) and the recorded result
// or error. It backs both idempotency and async jobs, so both survive a
// killed plugin.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// States of an envelope.
const (
	StatePending   = "pending"
	StateCompleted = "completed"
	StateFailed    = "failed"
)

// ErrNotFound is returned when no envelope matches.
var ErrNotFound = errors.New("envelope not found")

// Envelope is one stored row.
type Envelope struct {
	Key        string
	Digest     string
	ID         string
	Type       string
	State      string
	Async      bool
	Request    []byte // the request as received, to re-run an async job
	Result     []byte // the result JSON when completed
	Error      []byte // the error envelope JSON when failed
	CreatedAt  time.Time
	FinishedAt time.Time
}

// Store is an open database.
type Store struct{ db *sql.DB }

const schema = `
CREATE TABLE IF NOT EXISTS envelopes (
  key          TEXT PRIMARY KEY,
  digest       TEXT NOT NULL,
  id           TEXT NOT NULL UNIQUE,
  type         TEXT NOT NULL,
  state        TEXT NOT NULL CHECK (state IN ('pending','completed','failed')),
  async        INTEGER NOT NULL,
  request      BLOB NOT NULL,
  result       BLOB,
  error        BLOB,
  created_at   INTEGER NOT NULL,
  finished_at  INTEGER
);
CREATE INDEX IF NOT EXISTS envelopes_pending ON envelopes(state) WHERE state = 'pending';
`

// Open opens (creating if needed) the database at path in WAL mode with a
// busy timeout, so a second connection waits instead of failing.
// synchronous=FULL syncs the WAL at every commit: an envelope or job the
// plugin has answered for survives a crash of the machine, not only of
// the process.
func Open(path string) (*Store, error) {
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(FULL)&_pragma=foreign_keys(ON)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// One writer at a time is SQLite's rule; one connection makes it ours
	// too and keeps the pragmas on every statement.
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("prepare %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Claim records a new pending envelope under e.Key, or returns the row
// already there (claimed == false). A failed row with the same digest is
// replaced: a failure is not final for its key, so a caller's retry runs
// again.
func (s *Store) Claim(ctx context.Context, e *Envelope) (existing *Envelope, claimed bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	cur, err := scan(tx.QueryRowContext(ctx, selectCols+` WHERE key = ?`, e.Key))
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return nil, false, err
	case cur.State == StateFailed && cur.Digest == e.Digest:
		if _, err := tx.ExecContext(ctx, `DELETE FROM envelopes WHERE key = ?`, e.Key); err != nil {
			return nil, false, fmt.Errorf("replace failed envelope: %w", err)
		}
	default:
		return cur, false, nil
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO envelopes (key, digest, id, type, state, async, request, created_at) VALUES (?,?,?,?,?,?,?,?)`,
		e.Key, e.Digest, e.ID, e.Type, StatePending, e.Async, e.Request, e.CreatedAt.UnixMilli())
	if err != nil {
		return nil, false, fmt.Errorf("insert envelope: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, false, fmt.Errorf("commit: %w", err)
	}
	e.State = StatePending
	return nil, true, nil
}

// Complete records the result of a pending envelope.
func (s *Store) Complete(ctx context.Context, id string, result []byte, at time.Time) error {
	return s.finish(ctx, id, StateCompleted, result, nil, at)
}

// Fail records the error of a pending envelope.
func (s *Store) Fail(ctx context.Context, id string, errJSON []byte, at time.Time) error {
	return s.finish(ctx, id, StateFailed, nil, errJSON, at)
}

func (s *Store) finish(ctx context.Context, id, state string, result, errJSON []byte, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE envelopes SET state = ?, result = ?, error = ?, finished_at = ? WHERE id = ? AND state = 'pending'`,
		state, result, errJSON, at.UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("record %s envelope %s: %w", state, id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("record %s envelope %s: %w (or not pending)", state, id, ErrNotFound)
	}
	return nil
}

// Release deletes a pending envelope, leaving its key free: a synchronous
// call that failed records nothing, so the caller may try again.
func (s *Store) Release(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM envelopes WHERE id = ? AND state = 'pending'`, id); err != nil {
		return fmt.Errorf("release envelope %s: %w", id, err)
	}
	return nil
}

// Get returns the envelope with the id.
func (s *Store) Get(ctx context.Context, id string) (*Envelope, error) {
	return scan(s.db.QueryRowContext(ctx, selectCols+` WHERE id = ?`, id))
}

// Pending lists every pending envelope, oldest first.
func (s *Store) Pending(ctx context.Context) ([]*Envelope, error) {
	rows, err := s.db.QueryContext(ctx, selectCols+` WHERE state = 'pending' ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list pending envelopes: %w", err)
	}
	defer rows.Close()
	var out []*Envelope
	for rows.Next() {
		e, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

const selectCols = `SELECT key, digest, id, type, state, async, request, result, error, created_at, finished_at FROM envelopes`

type scanner interface{ Scan(...any) error }

func scan(r scanner) (*Envelope, error) {
	var e Envelope
	var created int64
	var finished sql.NullInt64
	err := r.Scan(&e.Key, &e.Digest, &e.ID, &e.Type, &e.State, &e.Async, &e.Request, &e.Result, &e.Error, &created, &finished)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read envelope: %w", err)
	}
	e.CreatedAt = time.UnixMilli(created)
	if finished.Valid {
		e.FinishedAt = time.UnixMilli(finished.Int64)
	}
	return &e, nil
}
